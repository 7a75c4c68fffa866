package agent

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/budget"
)

// Config is what the loop needs, parsed and validated: the binary's front
// builds it from its flags.
type Config struct {
	// NodeName is the node this agent verifies.
	NodeName string
	// LeaseNamespace holds the Lease that serializes re-taints across agents.
	LeaseNamespace string
	// Taints are the startup and unhealthy taints.
	Taints Taints
	// VerifiedLabel is set to "true" when verified and "false" when re-tainted.
	VerifiedLabel string
	// BypassAnnotation set to "true" on the node untaints it at once and disables re-tainting.
	BypassAnnotation string
	// WaitForTaints are taint keys that must be gone before the agent untaints.
	WaitForTaints []string
	// Continuous names the checks re-run every period once the node is
	// verified; the other checks are bootstrap checks. Empty makes the agent
	// bootstrap-only.
	Continuous []string
	// CheckTimeout bounds each check.
	CheckTimeout time.Duration
	// Period is the interval between periodic rounds, spread by ±Jitter×Period.
	Period time.Duration
	Jitter float64
	// InitialBackoff is the first delay of the start-up backoff; it doubles
	// for InitialTries rounds, then rounds run every Period.
	InitialBackoff time.Duration
	InitialTries   int
	// Thresholds are the streaks that re-taint and untaint again.
	Thresholds Thresholds
	// RecoverInterval is the wait after a passed round of a re-tainted node
	// that needs more passed rounds to be untainted, instead of the period
	// (at most Period; 0 waits the period).
	RecoverInterval time.Duration
	// FleetBudget caps the nodes re-tainted at once; FleetBudgetFlag is how
	// the user wrote it (flag and value), for the Events that name it.
	FleetBudget     budget.Budget
	FleetBudgetFlag string
	// Suspend is the operator's suspend switch: while it is on, or cannot
	// be read, no re-taint is written (suspend.go). nil: never suspended.
	Suspend SuspendSwitch
	// Observe is --mode=observe: checks run and are recorded, with what
	// enforce would have done; no taint is added or kept (observe.go).
	Observe bool
	// Publish is --mode=publish: checks run and their outcome is published
	// as the condition for a NodeReadinessRule, which owns the taint; the
	// agent adds no taint and removes none a rule can own (publish.go).
	// PublishPerCheck adds one condition per check.
	Publish         bool
	PublishPerCheck bool
	// ReverifyAfterReboot holds a verified node whose boot ID changed with
	// the startup taint until it verifies again (reboot.go).
	ReverifyAfterReboot bool
	// Clock is the time every rule of the loop reads: the timer between
	// rounds, the failure streak's start, the backoffs, the re-taint Lease.
	// nil is the real clock; tests step a fake one.
	Clock clock.WithTicker
}
