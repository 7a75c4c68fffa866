package api

// The defaults of the names kube-node-ready writes. Each is configurable by
// a flag of the binary that writes it; the names here are what a user who
// sets nothing sees, the taints aside: their defaults come from a preset
// (presets.go).
const (
	// StartupTaintKey is the seed startup taint, the "none" preset's: new
	// nodes start with the startup taint, and the agent removes it once
	// every check passed. The default preset (presets.go) uses a key the
	// autoscalers understand.
	StartupTaintKey = "node-ready/unverified"
	// StartupTaint is the startup taint in the flags' key=value:Effect form.
	StartupTaint = StartupTaintKey + "=true:NoSchedule"
	// UnhealthyTaintKey is the seed unhealthy taint, the "none" preset's:
	// the agent puts the unhealthy taint on a verified node whose checks
	// keep failing.
	UnhealthyTaintKey = "node-ready/unhealthy"
	// UnhealthyTaint is the unhealthy taint in key=value:Effect form.
	UnhealthyTaint = UnhealthyTaintKey + "=true:NoSchedule"
	// VerifiedLabel is "true" once the node is verified, "false" while it is
	// re-tainted.
	VerifiedLabel = "node-ready/verified"
	// SkipVerificationAnnotation set to "true" makes the agent untaint at
	// once and never re-taint.
	SkipVerificationAnnotation = "node-ready/skip-verification"

	// Finalizer holds a deleted Node until its cleanup ran.
	Finalizer = "infra.894.io/node-cleanup"
	// SkipCleanupAnnotation set to "true" makes the webhook remove the
	// finalizer without cleanup (the emergency bypass).
	SkipCleanupAnnotation = "infra.894.io/skip-cleanup"
	// ProtectAnnotation set to "true" keeps remediation from deleting a node.
	ProtectAnnotation = "infra.894.io/protect"
	// CleanupStatusAnnotation holds a CleanupStatus document on a node whose
	// cleanup is slow or failing.
	CleanupStatusAnnotation = "infra.894.io/cleanup-status"
	// ReplacingAnnotation marks a node remediation is replacing (value: a
	// JSON mark only remediation reads).
	ReplacingAnnotation = "infra.894.io/replacing"
	// StartupTaintAdmissionAnnotation is written by the webhook's admission
	// on every Node whose creation it decided while startup taint injection
	// is on; its value says what it did (added, present, not-selected,
	// no-key). A node created after the oldest node so marked that carries
	// none joined without admission: the webhook was down or not called.
	StartupTaintAdmissionAnnotation = "infra.894.io/startup-taint"
	// StartupTaintObserved is the value of StartupTaintAdmissionAnnotation
	// on a node created in observe mode that enforce would have tainted: the
	// agent takes it for a new node and records how long enforce would have
	// held it.
	StartupTaintObserved = "observed"
	// LocalVolumesAnnotation on a node names the local-volumes plugin's
	// storage classes for it.
	LocalVolumesAnnotation = "infra.894.io/cleanup-local-volumes"

	// ConditionType is the agent's condition on its node.
	ConditionType = "KubeNodeReady"

	// RetaintLease is the Lease, in the agents' namespace, that serializes
	// re-taints across agents.
	RetaintLease = "kube-node-ready-retaint"
	// FleetBudgetRefusedAnnotation on RetaintLease changes each time the
	// fleet budget refuses an agent's re-taint (value: the node and the
	// agent's time, for people; a reader takes only its change as the
	// signal, dated on its own clock). Remediation holds while it is recent:
	// an outage that fills the budget is the cluster's fault, not the nodes'.
	FleetBudgetRefusedAnnotation = "infra.894.io/fleet-budget-refused"

	// SuspendConfigMap is the operator's suspend switch, in the release's
	// namespace: while it exists, no agent re-taints, remediation replaces
	// nothing and admission adds no startup taint; untaints and cleanup go
	// on. kubectl node-ready suspend creates it and resume deletes it; the
	// chart never renders it (so no upgrade or sync resets it), and lets
	// the agents and the webhook only read it.
	SuspendConfigMap = "kube-node-ready-suspend"
	// SuspendReasonKey, SuspendSinceKey and SuspendByKey are the switch's
	// data: why, when (RFC 3339, the writer's clock: for people, never
	// judged) and who.
	SuspendReasonKey = "reason"
	SuspendSinceKey  = "since"
	SuspendByKey     = "by"
)

// The modes of both binaries (--mode, the chart's mode).
const (
	// ModeEnforce: taints are added and removed, remediation acts.
	ModeEnforce = "enforce"
	// ModeObserve: every check runs and is recorded; no taint is added, none
	// of ours is kept, no node is held, remediation only reports.
	ModeObserve = "observe"
	// ModePublish: every check runs and the agent publishes its condition
	// (or one per check, PublishPerCheck) for a NodeReadinessRule of the
	// node readiness controller, which owns the taint; the agent adds and
	// removes no taint a rule can own (none under readiness.k8s.io/), and
	// admission adds no startup taint unless configured to.
	ModePublish = "publish"
)

// The conditions publish mode writes (the agent's --publish-conditions).
const (
	// PublishOne: the one condition ConditionType.
	PublishOne = "one"
	// PublishPerCheck: ConditionType and, for each enabled check, one
	// condition of type CheckConditionPrefix + the check's name.
	PublishPerCheck = "per-check"
	// CheckConditionPrefix starts the type of a check's own condition in
	// publish mode with PublishPerCheck: node-ready/dns, node-ready/api.
	CheckConditionPrefix = "node-ready/"
	// NodeReadinessTaintPrefix is the prefix every taint key of a
	// NodeReadinessRule has (the node readiness controller's CRD enforces
	// it): a rule can own a taint only under it. Karpenter (core v1.13.0
	// and later) ignores keys under it on a node not yet initialized.
	NodeReadinessTaintPrefix = "readiness.k8s.io/"
)

// The reasons of the agent's condition.
const (
	// ReasonChecksPassed: the latest round passed (status True).
	ReasonChecksPassed = "ChecksPassed"
	// ReasonChecksFailing: checks fail (status False).
	ReasonChecksFailing = "ChecksFailing"
	// ReasonRecovering: a re-tainted node's checks pass again, not yet
	// enough rounds in a row to untaint it (status False).
	ReasonRecovering = "Recovering"
	// ReasonBootstrapped: verified by a bootstrap-only agent; nothing runs
	// any more (status True).
	ReasonBootstrapped = "Bootstrapped"
	// ReasonBypassed: the skip-verification annotation is set (status True).
	ReasonBypassed = "Bypassed"
	// ReasonWouldHold: observe mode; a new node whose checks have not passed
	// yet, which enforce would hold with the startup taint (status False).
	ReasonWouldHold = "WouldHold"
	// ReasonWouldRetaint: observe mode; checks failed enough rounds in a
	// row that enforce would have re-tainted the node (status False).
	ReasonWouldRetaint = "WouldRetaint"
	// ReasonRebooted: the node's boot ID differs from the one it was
	// verified under (--reverify-after-reboot); it is held with the startup
	// taint until every check and gate passes again (status False).
	ReasonRebooted = "Rebooted"
	// ReasonWouldHoldAfterReboot: observe mode with
	// --reverify-after-reboot; the node rebooted since it was verified and
	// its checks have not passed since, so enforce would hold it with the
	// startup taint (status False).
	ReasonWouldHoldAfterReboot = "WouldHoldAfterReboot"
	// ReasonVerifying: publish mode; the node has not passed every check
	// and gate yet (status False).
	ReasonVerifying = "Verifying"
	// ReasonCheckPassed and ReasonCheckFailing are the reasons of a check's
	// own condition in publish mode (PublishPerCheck): True, False.
	ReasonCheckPassed  = "CheckPassed"
	ReasonCheckFailing = "CheckFailing"
)
