package api

// The environment prefixes and the flags that `kubectl node-ready doctor`
// (and suspend, bypass) read back from the deployed agent DaemonSet and
// webhook Deployment: each binary registers its flag under the constant
// the plugin reads it by, so a rename cannot leave the plugin reading a
// flag that is no longer there. A flag's environment twin is the prefix,
// "_" and the flag's name upper-cased with "-" and "." as "_"
// (--cert-mode is KNR_WEBHOOK_CERT_MODE).
const (
	AgentEnvPrefix   = "KNR_AGENT"
	WebhookEnvPrefix = "KNR_WEBHOOK"

	// Both binaries (and ExternalNamesFlag).

	AutoscalerFlag        = "autoscaler"
	PreviousTaintKeysFlag = "previous-taint-keys"
	SuspendConfigMapFlag  = "suspend-configmap"
	ModeFlag              = "mode"
	// PeerServiceFlag is the agents' headless Service: the agent's peers,
	// and the webhook's source of the slice names it hints at admission.
	PeerServiceFlag = "check.network.peer-service"

	// The agent.

	StartupTaintFlag               = "startup-taint"
	UnhealthyTaintFlag             = "unhealthy-taint"
	SkipVerificationAnnotationFlag = "skip-verification-annotation"
	ReverifyAfterRebootFlag        = "reverify-after-reboot"

	// The webhook.

	AgentStartupTaintFlag      = "agent-startup-taint"
	AgentUnhealthyTaintFlag    = "agent-unhealthy-taint"
	FinalizerFlag              = "finalizer"
	LegacyFinalizersFlag       = "legacy-finalizers"
	CleanupFlag                = "cleanup"
	RemediationFlag            = "remediation"
	UnverifiedDeadlineFlag     = "unverified-deadline"
	InjectStartupTaintFlag     = "inject-startup-taint"
	KarpenterReadinessKeysFlag = "karpenter-readiness-keys"
	SkipCleanupAnnotationFlag  = "skip-cleanup-annotation"
)
