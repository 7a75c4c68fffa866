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
{{- /* The operator's suspend switch (internal/api SuspendConfigMap): never rendered, only read. */}}
{{- define "knr.suspendName" -}}kube-node-ready-suspend{{- end -}}
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

{{/*
The taint keys of each `autoscaler` preset: the same table as the binaries'
(internal/api/presets.go; test/e2e/chart checks that they agree).
*/}}
{{- define "knr.presets" -}}
cluster-autoscaler: {startup: startup-taint.cluster-autoscaler.kubernetes.io/node-ready, unhealthy: status-taint.cluster-autoscaler.kubernetes.io/node-ready}
karpenter: {startup: readiness.k8s.io/node-ready, unhealthy: status-taint.cluster-autoscaler.kubernetes.io/node-ready}
none: {startup: node-ready/unverified, unhealthy: node-ready/unhealthy}
{{- end -}}

{{/* The autoscaler preset; absent after `helm upgrade --reuse-values` from an older chart. */}}
{{- define "knr.autoscaler" -}}
{{- .Values.autoscaler | default "cluster-autoscaler" -}}
{{- end -}}

{{/* The startup taint's key: agent.startupTaint.key, else the preset's. */}}
{{- define "knr.startupKey" -}}
{{- .Values.agent.startupTaint.key | default (index (include "knr.presets" . | fromYaml) (include "knr.autoscaler" .)).startup -}}
{{- end -}}

{{/* The re-taint (unhealthy) taint's key: agent.retaintTaint.key, else the preset's. */}}
{{- define "knr.retaintKey" -}}
{{- .Values.agent.retaintTaint.key | default (index (include "knr.presets" . | fromYaml) (include "knr.autoscaler" .)).unhealthy -}}
{{- end -}}

{{/* The re-taint taint as key=value:Effect. */}}
{{- define "knr.retaintTaint" -}}
{{ include "knr.retaintKey" . }}={{ .Values.agent.retaintTaint.value }}:{{ .Values.agent.retaintTaint.effect }}
{{- end }}

{{/* The startup taint as key=value:Effect. */}}
{{- define "knr.startupTaint" -}}
{{ include "knr.startupKey" . }}={{ .Values.agent.startupTaint.value }}:{{ .Values.agent.startupTaint.effect }}
{{- end -}}

{{/*
The previous taint keys, as a JSON list: every preset's keys and
agent.previousTaintKeys, the keys in use left out. The agent removes them
(never adds them) and the webhook counts a node carrying one as unverified,
so changing the keys strands no node.
*/}}
{{- define "knr.previousKeys" -}}
{{- $current := list (include "knr.startupKey" .) (include "knr.retaintKey" .) -}}
{{- $keys := .Values.agent.previousTaintKeys | default list -}}
{{- range $name, $p := include "knr.presets" . | fromYaml -}}
{{- $keys = append (append $keys $p.startup) $p.unhealthy -}}
{{- end -}}
{{- $out := list -}}
{{- range $keys | uniq | sortAlpha -}}
{{- if not (has . $current) }}{{ $out = append $out . }}{{ end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
Where the agent DaemonSet's pods run, as JSON of a PodSpec's nodeSelector,
affinity and tolerations: the DaemonSet renders its placement from it, and
the webhook gets the same text (--agent-placement) to taint only the new
nodes the DaemonSet will run on. One source, so the two never disagree.
*/}}
{{- define "knr.agentPlacement" -}}
{{- $a := .Values.agent -}}
{{- $p := dict "tolerations" ($a.tolerations | default list) -}}
{{- with $a.nodeSelector }}{{ $_ := set $p "nodeSelector" . }}{{ end -}}
{{- with $a.affinity }}{{ $_ := set $p "affinity" . }}{{ end -}}
{{- toJson $p -}}
{{- end -}}

{{/* Whether admission adds the startup taint; absent after `helm upgrade --reuse-values` from an older chart: off. */}}
{{- define "knr.injectStartupTaint" -}}
{{- $publish := eq .Values.mode "publish" }}
{{- and .Values.webhook.enabled .Values.webhook.cleanup.enabled (dig "startupTaint" "inject" false .Values.webhook) (or (not $publish) (dig "startupTaint" "injectInPublishMode" false .Values.webhook)) -}}
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
The finalizer names kube-node-ready shipped, as a JSON list: the same list
as internal/api/finalizers.go (test/e2e/chart checks that they agree). The
webhook honours every one of them whatever the values say.
*/}}
{{- define "knr.shippedFinalizers" -}}
{{- toJson (list "infra.894.io/node-cleanup") -}}
{{- end -}}

{{- /*
Older names of the webhook's finalizer, comma-separated: webhook.legacyFinalizers
and every shipped name, minus the current one. No lookup: `helm template`,
Argo CD and Flux render the same list as `helm upgrade`, so renaming
webhook.finalizer away from a shipped name strands nothing.
*/}}
{{- define "knr.legacyFinalizers" -}}
{{- $names := concat (.Values.webhook.legacyFinalizers | default list) (include "knr.shippedFinalizers" . | fromJsonArray) }}
{{- without ($names | compact | uniq) .Values.webhook.finalizer | join "," }}
{{- end -}}

{{- /*
A custom finalizer name (one the project never shipped) is honoured only
while it is webhook.finalizer: renaming away from it would leave it on every
node. Where Helm can see the running Deployment (install, upgrade: lookup),
such a rename fails here; under `helm template` lookup is empty, so this is
a refusal Helm users get, never something safety depends on (docs/install.md,
GitOps).
*/}}
{{- define "knr.refuseStrandedRename" -}}
{{- $shipped := include "knr.shippedFinalizers" . | fromJsonArray }}
{{- with lookup "apps/v1" "Deployment" .Release.Namespace (include "knr.webhookName" .) }}
{{- range (index .spec.template.spec.containers 0).args }}
{{- if hasPrefix "--finalizer=" . }}
{{- $old := trimPrefix "--finalizer=" . }}
{{- if and (ne $old $.Values.webhook.finalizer) (not (has $old $shipped)) }}
{{- fail (printf "webhook.finalizer: the running webhook uses the custom finalizer %q, which kube-node-ready never shipped; renaming it to %q would leave %q on every node. Keep webhook.finalizer=%s, or first remove the old name from every node (kube-node-ready-webhook remove-finalizers --finalizer=%s), then rename." $old $.Values.webhook.finalizer $old $old $old) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* A Go duration ("1h30m", "900s") in seconds, for comparisons. */}}
{{- define "knr.seconds" -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(h|ms|us|µs|ns|m|s)" . -1 -}}
{{- $n := regexFind "^[0-9.]+" . -}}
{{- $unit := trimPrefix $n . -}}
{{- $total = addf $total (mulf (float64 $n) (get (dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001) $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}
