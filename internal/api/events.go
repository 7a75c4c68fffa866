package api

import "slices"

// The reasons of the Events the two binaries record. The chart's alerts name
// them and `kubectl node-ready why` prints them; tests find them by these
// names, so a reason is spelled here once.
const (
	// The agent, on its Node.

	// EventNodeVerified: the checks passed and the node was untainted.
	EventNodeVerified = "NodeVerified"
	// EventNodeVerificationFailed: the start-up tries are used up and the
	// checks still fail; the node stays tainted (Warning).
	EventNodeVerificationFailed = "NodeVerificationFailed"
	// EventNodeRetainted: checks kept failing on a verified node and it was
	// re-tainted.
	EventNodeRetainted = "NodeRetainted"
	// EventRetaintSuppressed: a re-taint was not made: the fleet budget is
	// used up (Warning).
	EventRetaintSuppressed = "RetaintSuppressed"
	// EventRetaintDeferred: a re-taint waits for the re-taint Lease.
	EventRetaintDeferred = "RetaintDeferred"
	// EventRetaintSuspended: a re-taint waits while the suspend switch is on
	// (or cannot be read); recorded once per episode.
	EventRetaintSuspended = "RetaintSuspended"
	// EventDaemonSetGateTimeout: the DaemonSet gate gave up on a DaemonSet.
	EventDaemonSetGateTimeout = "DaemonSetGateTimeout"
	// EventNodeHeldAfterReboot: a verified node was held after a reboot.
	EventNodeHeldAfterReboot = "NodeHeldAfterReboot"
	// EventNodeWouldBeRetainted, EventNodeWouldBeUntainted and
	// EventNodeWouldBeHeldAfterReboot: what enforce mode would have done, in
	// observe mode.
	EventNodeWouldBeRetainted       = "NodeWouldBeRetainted"
	EventNodeWouldBeUntainted       = "NodeWouldBeUntainted"
	EventNodeWouldBeHeldAfterReboot = "NodeWouldBeHeldAfterReboot"
	// EventNodeConditionFalse: in publish mode, a verified node's checks
	// failed --retaint-threshold rounds in a row and its condition was set
	// False (a continuous NodeReadinessRule then taints it) (Warning).
	EventNodeConditionFalse = "NodeConditionFalse"
	// EventDNSBackendDegraded: an endpoint of the cluster DNS failed while
	// others answered: a broken backend elsewhere, not counted against the
	// node (Warning).
	EventDNSBackendDegraded = "DNSBackendDegraded"

	// The webhook's node cleanup, on the deleted Node.

	EventCleanupStarted      = "CleanupStarted"
	EventCleanupCompleted    = "CleanupCompleted"
	EventCleanupFailed       = "CleanupFailed"
	EventCleanupSkipped      = "CleanupSkipped"
	EventCleanupPluginFailed = "CleanupPluginFailed"
	// EventCleanupDeadlineExceeded: critical plugins still failed past the
	// cleanup deadline and the finalizer was removed anyway.
	EventCleanupDeadlineExceeded = "CleanupDeadlineExceeded"
	// EventCleanupHeld: no valid cleanup configuration; the node's deletion
	// waits until there is one.
	EventCleanupHeld = "CleanupHeld"
	// EventLocalVolumesHostnameShared: the node's local volumes were left
	// alone because another live Node carries the kubernetes.io/hostname
	// they are pinned to (Warning).
	EventLocalVolumesHostnameShared = "LocalVolumesHostnameShared"

	// The webhook's cleanup configuration and plugin health, on its Pod.

	// EventCleanupConfigInvalid: a changed cleanup configuration was
	// rejected.
	EventCleanupConfigInvalid   = "CleanupConfigInvalid"
	EventCleanupPluginUnhealthy = "CleanupPluginUnhealthy"
	EventCleanupPluginHealthy   = "CleanupPluginHealthy"

	// The webhook's remediation, on the Node.

	// EventNodeUnverifiedPastDeadline: past the deadline (policy report,
	// dry run, or a replacement that is held back).
	EventNodeUnverifiedPastDeadline = "NodeUnverifiedPastDeadline"
	// EventNodeReplacing: its NodeClaim or the Node was deleted.
	EventNodeReplacing = "NodeReplacing"
	// EventNodeReplaceFailed: the delete failed; tried again next scan.
	EventNodeReplaceFailed = "NodeReplaceFailed"
	// EventRemediationPaused: the circuit breaker opened; recorded once on
	// the node whose replacement it stopped first.
	EventRemediationPaused = "RemediationPaused"
	// EventRemediationResumed: a new node verified and closed the breaker;
	// recorded on that node.
	EventRemediationResumed = "RemediationResumed"

	// The webhook's admission, on the Node.

	// EventStartupTaintMissed: a node joined without admission's startup
	// taint decision.
	EventStartupTaintMissed = "StartupTaintMissed"
)

// EventReasons are all the reasons above (and the external-name ones),
// for tests that hold a document or the chart to them.
func EventReasons() []string {
	return slices.Clone(eventReasons)
}

var eventReasons = []string{
	EventNodeVerified, EventNodeVerificationFailed, EventNodeRetainted, EventRetaintSuppressed,
	EventRetaintDeferred, EventRetaintSuspended, EventDaemonSetGateTimeout, EventNodeHeldAfterReboot,
	EventNodeWouldBeRetainted, EventNodeWouldBeUntainted, EventNodeWouldBeHeldAfterReboot, EventNodeConditionFalse, EventDNSBackendDegraded,
	EventCleanupStarted, EventCleanupCompleted, EventCleanupFailed, EventCleanupSkipped, EventCleanupPluginFailed,
	EventCleanupDeadlineExceeded, EventCleanupHeld, EventLocalVolumesHostnameShared,
	EventCleanupConfigInvalid, EventCleanupPluginUnhealthy, EventCleanupPluginHealthy,
	EventNodeUnverifiedPastDeadline, EventNodeReplacing, EventNodeReplaceFailed, EventRemediationPaused, EventRemediationResumed,
	EventStartupTaintMissed,
	EventExternalNameUnresolved, EventExternalNameResolved,
}
