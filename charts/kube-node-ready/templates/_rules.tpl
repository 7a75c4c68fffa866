{{/* The alerting rules; rendered into the PrometheusRule and checked by promtool in the tests. */}}
{{- define "knr.prometheusRules" -}}
groups:
  - name: kube-node-ready
    rules:
      - alert: NodeUnverified
        expr: node_ready_verified == 0
        for: {{ .Values.monitoring.prometheusRule.unverifiedFor }}
        labels:
          severity: warning
        annotations:
          summary: "Node {{ "{{" }} $labels.node {{ "}}" }} is still unverified"
          description: "The kube-node-ready agent on {{ "{{" }} $labels.node {{ "}}" }} has not verified the node for {{ .Values.monitoring.prometheusRule.unverifiedFor }}; it keeps the {{ include "knr.startupKey" . }} taint. Run `kube-node-ready-agent check` in the agent pod or read `kubectl logs -l app=kube-node-ready`."
      - alert: NodeRetainted
        expr: increase(node_ready_taint_operations_total{operation="add",result="success"}[10m]) > 0
        labels:
          severity: warning
        annotations:
          summary: "Node {{ "{{" }} $labels.node {{ "}}" }} was re-tainted"
          description: "Checks failed repeatedly on {{ "{{" }} $labels.node {{ "}}" }} and the agent put the {{ include "knr.retaintKey" . }} taint on it. `kubectl describe node` shows the failing checks in its KubeNodeReady condition."
      - alert: NodeRetaintSuppressed
        expr: increase(node_ready_retaint_suppressed_total[10m]) > 0
        labels:
          severity: critical
        annotations:
          summary: "Re-taint of {{ "{{" }} $labels.node {{ "}}" }} suppressed by the fleet budget"
          description: "Checks keep failing on more nodes than the fleet budget (--fleet-budget) allows to re-taint: likely a cluster-wide fault (cluster DNS, API server, CNI)."
      - alert: NodeRetaintDeferred
        expr: increase(node_ready_retaint_deferred_total{reason!="suspended"}[5m]) > 0
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "Re-taint of {{ "{{" }} $labels.node {{ "}}" }} has waited for the re-taint Lease for 10 minutes ({{ "{{" }} $labels.reason {{ "}}" }})"
          description: "Checks keep failing on {{ "{{" }} $labels.node {{ "}}" }}, but its re-taint keeps waiting for the Lease kube-node-ready-retaint (lease_held: another agent holds it; lease_error: the agent cannot read or write it; lease_expired: counting the fleet outlasted it). An agent takes over a Lease left by another after 15 s, so this is not one agent's doing: check the agent's RBAC on Leases and the API server. The RetaintDeferred Events on the node say more."
      - alert: KubeNodeReadySuspended
        expr: max by (namespace) (node_ready_suspended) > 0
        labels:
          severity: warning
        annotations:
          summary: "kube-node-ready is suspended in {{ "{{" }} $labels.namespace {{ "}}" }}"
          description: "The operator's suspend switch (ConfigMap {{ include "knr.suspendName" . }}) is on: no node is re-tainted, remediation replaces nothing and new nodes get no startup taint; untaints and cleanup go on. `kubectl node-ready status` shows who suspended it, when and why; `kubectl node-ready resume` ends it."
      - alert: NodeDaemonSetGateTimeout
        expr: increase(node_ready_gate_timeouts_total[30m]) > 0
        labels:
          severity: warning
        annotations:
          summary: "A DaemonSet was not Ready on {{ "{{" }} $labels.node {{ "}}" }} within the gate's timeout"
          description: "The node was untainted without it; see the DaemonSetGateTimeout Event on the node for which DaemonSet."
      - alert: NodeUnverifiedPastDeadline
        expr: max by (namespace) (node_remediation_overdue_nodes) > 0
        for: {{ .Values.monitoring.prometheusRule.overdueFor }}
        labels:
          severity: warning
        annotations:
          summary: "{{ "{{" }} $value {{ "}}" }} nodes are unverified past the remediation deadline"
          description: "Nodes still carry the {{ include "knr.startupKey" . }} or {{ include "knr.retaintKey" . }} taint past webhook.remediation.unverifiedDeadline and are not being replaced (policy report, dry run, protected, or held by the fleet or replacement budget or the circuit breaker). The NodeUnverifiedPastDeadline Events on them say which and why."
      - alert: NodeRemediationCircuitOpen
        expr: max by (namespace) (node_remediation_circuit_open) > 0
        labels:
          severity: critical
        annotations:
          summary: "Remediation stopped replacing nodes: most new nodes never verify"
          description: "Too many of the latest new nodes went past webhook.remediation.unverifiedDeadline without verifying (webhook.remediation.breaker), so replacing them stopped: the cause is most likely shared (agent image, CNI, subnet, cluster DNS). The RemediationPaused Event says how many; `kubectl describe node` of an unverified node shows its failing checks. Replacing resumes when a new node verifies."
      - alert: NodeCleanupPending
        expr: node_cleanup_oldest_pending_seconds > {{ .Values.monitoring.prometheusRule.cleanupPendingSeconds }}
        for: {{ .Values.monitoring.prometheusRule.cleanupPendingFor }}
        labels:
          severity: warning
        annotations:
          summary: "A node has been waiting for cleanup for more than {{ .Values.monitoring.prometheusRule.cleanupPendingSeconds }} s"
          description: "A deleted node still carries the infra.894.io/node-cleanup finalizer. See the CleanupFailed Events on it; `kubectl annotate node NAME infra.894.io/skip-cleanup=true` bypasses cleanup."
      - alert: NodeCleanupWebhookErrors
        expr: sum by (namespace, pod) (rate(node_cleanup_webhook_requests_total{result=~"invalid|panic|bad_request|too_large"}[5m])) > 0
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "The node-cleanup admission webhook answers requests it cannot handle"
          description: "{{ "{{" }} $labels.pod {{ "}}" }} answered malformed or failing admission requests; nodes are still admitted, but may miss the finalizer until back-fill adds it."
{{- end -}}
