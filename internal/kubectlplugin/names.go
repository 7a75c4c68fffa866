// Package kubectlplugin is `kubectl node-ready`: what kube-node-ready did to
// each node and why, read from the marks the agent and the webhook leave on
// Nodes (taints, label, the KubeNodeReady condition, the cleanup status
// annotation, Events), and the two bypass annotations set and removed.
//
// Reading a node into what the commands show (report.go, cleanup.go,
// condition.go, events.go) and printing it (print.go) are pure functions;
// api.go is the only place that talks to the API server, behind API.
package kubectlplugin

// The names the agent and the webhook use by default. They are copies: the
// agent's and the webhook's packages carry their whole dependency set (DNS,
// Prometheus, the cleanup plugins) into any binary that imports them, and
// names_test.go fails when a copy drifts from the source.
const (
	// ConditionType is the agent's condition on its node (agent.ConditionType).
	ConditionType = "KubeNodeReady"
	// StartupTaintKey is the taint new nodes start with (agent --startup-taint).
	StartupTaintKey = "node-ready/unverified"
	// UnhealthyTaintKey is the taint put on a verified node that broke
	// (agent --retaint-taint).
	UnhealthyTaintKey = "node-ready/unhealthy"
	// VerifiedLabel is true once verified, false when re-tainted (agent --verified-label).
	VerifiedLabel = "node-ready/verified"
	// BypassAnnotation set to true makes the agent untaint at once and never
	// re-taint (agent --skip-annotation).
	BypassAnnotation = "node-ready/skip-verification"
	// Finalizer holds a deleted node until its cleanup ran (webhook --finalizer).
	Finalizer = "infra.894.io/node-cleanup"
	// SkipCleanupAnnotation set to true makes the webhook remove the
	// finalizer without cleanup (webhook --skip-annotation).
	SkipCleanupAnnotation = "infra.894.io/skip-cleanup"
	// CleanupStatusAnnotation is the webhook's cleanup progress on a deleted
	// node (finalizer.StatusAnnotation).
	CleanupStatusAnnotation = "infra.894.io/cleanup-status"
)

// The agent's condition reasons (agent.Reason*).
const (
	ReasonChecksPassed  = "ChecksPassed"
	ReasonChecksFailing = "ChecksFailing"
	ReasonRecovering    = "Recovering"
	ReasonBootstrapped  = "Bootstrapped"
	ReasonBypassed      = "Bypassed"
)

// FieldManager names this plugin's writes in managedFields.
const FieldManager = "kubectl-node_ready"
