{{/* Names */}}
{{- define "knr.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "knr.agentName" -}}{{ include "knr.fullname" . }}{{- end -}}
{{- define "knr.webhookName" -}}{{ include "knr.fullname" . | trunc 55 | trimSuffix "-" }}-webhook{{- end -}}

{{- define "knr.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The agent pod label is fixed so `kubectl logs -l app=kube-node-ready` works. */}}
{{- define "knr.agentSelector" -}}
app: kube-node-ready
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "knr.webhookSelector" -}}
app: kube-node-ready-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "knr.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion -}}
{{- if .image.digest -}}{{ .image.repository }}@{{ .image.digest }}{{- else -}}{{ .image.repository }}:{{ $tag }}{{- end -}}
{{- end -}}

{{/* The startup taint as key=value:Effect. */}}
{{- define "knr.retaintTaint" -}}
{{ .Values.agent.retaintTaint.key }}={{ .Values.agent.retaintTaint.value }}:{{ .Values.agent.retaintTaint.effect }}
{{- end }}

{{- define "knr.startupTaint" -}}
{{ .Values.agent.startupTaint.key }}={{ .Values.agent.startupTaint.value }}:{{ .Values.agent.startupTaint.effect }}
{{- end -}}

{{- define "knr.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- /*
Older names of the webhook's finalizer, comma-separated: webhook.legacyFinalizers,
plus the --finalizer and --legacy-finalizers of the webhook Deployment this
release runs now (lookup; empty in `helm template`), minus the current name.
So changing webhook.finalizer by `helm upgrade` leaves the old name to the
webhook and to the uninstall Job, which remove it; nothing is stranded.
*/}}
{{- define "knr.legacyFinalizers" -}}
{{- $names := list }}
{{- range .Values.webhook.legacyFinalizers }}{{ $names = append $names . }}{{ end }}
{{- with lookup "apps/v1" "Deployment" .Release.Namespace (include "knr.webhookName" .) }}
{{- range (index .spec.template.spec.containers 0).args }}
{{- if hasPrefix "--finalizer=" . }}{{ $names = append $names (trimPrefix "--finalizer=" .) }}{{ end }}
{{- if hasPrefix "--legacy-finalizers=" . }}{{ $names = concat $names (splitList "," (trimPrefix "--legacy-finalizers=" .)) }}{{ end }}
{{- end }}
{{- end }}
{{- without ($names | compact | uniq) .Values.webhook.finalizer | join "," }}
{{- end -}}
