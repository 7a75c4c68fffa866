package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Why a re-taint the checks call for did not happen in a round: the reason
// label of node_ready_retaint_deferred_total. The fleet budget's own refusal
// is node_ready_retaint_suppressed_total.
const (
	// DeferLeaseHeld: another agent holds the re-taint Lease.
	DeferLeaseHeld = "lease_held"
	// DeferLeaseError: the Lease could not be read or written.
	DeferLeaseError = "lease_error"
	// DeferLeaseExpired: the count took longer than the Lease allows, so
	// another agent may have taken it over; tainting now could overshoot.
	DeferLeaseExpired = "lease_expired"
)

// deferReasons lists the reasons a re-taint is deferred.
var deferReasons = []string{DeferLeaseHeld, DeferLeaseError, DeferLeaseExpired, DeferSuspended, DeferSuspendUnreadable}

// retaint re-applies the taint if the fleet budget allows: under the
// re-taint Lease it counts the nodes already re-tainted (one label-selector
// read) and the nodes in the cluster. A refusal, or a re-taint deferred
// because the Lease cannot be had, is counted and recorded as an Event every
// round and logged once per episode: a blocked re-taint is never silent.
//
// The operator's suspend switch holds it first, as the watch saw it (no
// request while suspended, the state a fleet-wide outage is suspended in),
// and again on a fresh read right before the taint is written, so a
// suspend the watch delivers late still stops it; a switch that cannot be
// read holds too.
//
// A node held after a reboot (want.Reboot) passes the same gates: it counts
// against the same budget, so a cluster-wide power event holds at most the
// budget's worth of nodes.
func (a *Agent) retaint(ctx context.Context, node *corev1.Node, want Desired) error {
	cause := retaintCause(want)
	if a.suspended(node, a.suspendState(), cause) {
		return nil
	}
	got, holder, err := a.lock.acquire(ctx)
	if err != nil {
		a.deferRetaint(node, DeferLeaseError, holder, cause)
		return fmt.Errorf("take re-taint lease %s/%s: %w", a.lock.namespace, a.lock.name, err)
	}
	if !got {
		a.deferRetaint(node, DeferLeaseHeld, holder, cause)
		return nil
	}
	defer a.lock.release(context.WithoutCancel(ctx))
	// Count and taint within the lease's time, or not at all.
	ctx, cancel := context.WithDeadline(ctx, a.lock.deadline())
	defer cancel()
	others, total, err := a.fleet(ctx)
	if err != nil && !a.lock.held() {
		// The count ran out of the lease's time: the budget said nothing.
		a.deferRetaint(node, DeferLeaseExpired, "", cause)
		return nil
	}
	if err != nil {
		// Without the count the blast radius is unknown: err on the side of not tainting.
		a.metrics.retaintSuppressed.Inc()
		return fmt.Errorf("read the fleet budget, not re-tainting: %w", err)
	}
	limit := a.cfg.FleetBudget.Limit(total)
	if !RetaintAllowed(others, limit) {
		a.metrics.retaintSuppressed.Inc()
		// Said on the Lease as well: remediation replaces nothing while
		// the budget refuses re-taints (the fault is most likely the cluster's).
		a.lock.refuseBy(node.Name)
		a.logBlocked("fleet_budget", "re-taint suppressed by the fleet budget", "retainted_nodes", others, "limit", limit, "nodes", total,
			"consecutive_failures", a.loop.failures)
		// The note stays the same while the outage lasts, so repeats count into
		// one Event series instead of one Event per round.
		a.event(node, corev1.EventTypeWarning, api.EventRetaintSuppressed, "Retaint",
			"%s, but the fleet budget is used up: %d nodes may be re-tainted at once (%s)",
			cause, limit, a.cfg.FleetBudgetFlag)
		return nil
	}
	if !a.lock.held() {
		a.deferRetaint(node, DeferLeaseExpired, "", cause)
		return nil
	}
	if a.suspended(node, a.suspendRead(ctx), cause) {
		return nil
	}
	a.loop.blockedLogged = ""
	return a.apply(ctx, want)
}

// retaintRefusedOn says why node, in the version a re-taint patch applies
// to, must not be re-tainted, or "". The patch pins that version (see
// NodePatch), so these gates hold at the moment the taint is written, not
// only when the round began.
func (a *Agent) retaintRefusedOn(node *corev1.Node, want Desired) string {
	if a.bypassed(node) {
		return "annotation " + a.cfg.BypassAnnotation + "=true"
	}
	if want.Reboot {
		return a.rebootRefusedOn(node)
	}
	if startupTainted, _ := NodeState(node, a.cfg.Taints, a.cfg.VerifiedLabel); startupTainted {
		return "the node carries the startup taint: it is being verified"
	}
	return ""
}

// deferRetaint reports a re-taint the Lease kept from happening this round.
func (a *Agent) deferRetaint(node *corev1.Node, reason, holder, cause string) {
	a.metrics.retaintDeferred.WithLabelValues(reason).Inc()
	lease := a.lock.namespace + "/" + a.lock.name
	switch reason {
	case DeferLeaseHeld:
		a.logBlocked(reason+"/"+holder, "re-taint deferred: another agent holds the re-taint lease", "lease", lease, "holder", holder,
			"takeover_after_seconds", a.lock.duration.Seconds(), "consecutive_failures", a.loop.failures)
		a.event(node, corev1.EventTypeWarning, api.EventRetaintDeferred, "Retaint",
			"%s; the re-taint waits for Lease %s held by %s (taken over once unchanged for %s)", cause, lease, holder, a.lock.duration)
	case DeferLeaseError:
		a.logBlocked(reason, "re-taint deferred: cannot take the re-taint lease", "lease", lease, "consecutive_failures", a.loop.failures)
		a.event(node, corev1.EventTypeWarning, api.EventRetaintDeferred, "Retaint",
			"%s, but Lease %s cannot be taken; the re-taint is retried", cause, lease)
	case DeferLeaseExpired:
		a.logBlocked(reason, "re-taint deferred: the fleet count outlasted the re-taint lease", "lease", lease, "consecutive_failures", a.loop.failures)
		a.event(node, corev1.EventTypeWarning, api.EventRetaintDeferred, "Retaint",
			"%s, but counting the fleet budget outlasted Lease %s; the re-taint is retried", cause, lease)
	}
}

// retaintCause says in an Event why the agent wants to taint its node.
func retaintCause(want Desired) string {
	if want.Reboot {
		return "the node rebooted since it was verified (boot ID changed) and must be verified again"
	}
	return "checks keep failing"
}

// logBlocked logs why a re-taint is blocked once per episode: again only
// when the reason (or the holder) changes.
func (a *Agent) logBlocked(key, msg string, args ...any) {
	if a.loop.blockedLogged == key {
		return
	}
	a.loop.blockedLogged = key
	a.log.Warn(msg, args...)
}

// RetaintAllowed says whether one more re-tainted node stays within limit.
func RetaintAllowed(alreadyRetainted, limit int) bool {
	return alreadyRetainted+1 <= limit
}

// fleet returns how many other nodes carry verified=false and how many nodes
// there are. A node with the bypass annotation does not count whatever its
// label says: its agent may not have removed the label yet (or may not run).
func (a *Agent) fleet(ctx context.Context) (others, total int, err error) {
	sel := a.cfg.VerifiedLabel + "=false"
	// A consistent read (no resourceVersion): the previous Lease holder's taint must be seen.
	retainted, err := a.nodes.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return 0, 0, fmt.Errorf("list nodes %s: %w", sel, err)
	}
	for i := range retainted.Items {
		if n := &retainted.Items[i]; n.Name != a.cfg.NodeName && !a.bypassed(n) {
			others++
		}
	}
	// Count without reading every node: one item plus the server's count of the rest.
	opts := metav1.ListOptions{Limit: 1}
	for {
		page, err := a.nodes.List(ctx, opts)
		if err != nil {
			return 0, 0, fmt.Errorf("count nodes: %w", err)
		}
		total += len(page.Items)
		if page.RemainingItemCount != nil {
			total += int(*page.RemainingItemCount)
			break
		}
		if page.Continue == "" {
			break
		}
		opts = metav1.ListOptions{Limit: 500, Continue: page.Continue}
	}
	return others, total, nil
}
