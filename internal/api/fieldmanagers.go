package api

// The field managers that name our writes in an object's managedFields, one
// per binary: who changed a Node, a Secret or a ConfigMap reads there.
const (
	// FieldManagerAgent: the agent's writes (its node's taints, label and
	// condition, the re-taint Lease).
	FieldManagerAgent = "kube-node-ready-agent"
	// FieldManagerWebhook: the webhook's writes (back-fill and cleanup,
	// remediation's marks, the certificate Secret and the webhook
	// configuration's caBundle, the finalizer record).
	FieldManagerWebhook = "kube-node-ready-webhook"
	// FieldManagerKubectlPlugin: `kubectl node-ready`'s writes (bypass,
	// cleanup skip, the suspend switch).
	FieldManagerKubectlPlugin = "kubectl-node_ready"
)
