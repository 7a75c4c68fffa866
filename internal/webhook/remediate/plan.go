package remediate

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Plan is what one scan decided.
type Plan struct {
	// Overdue are the nodes past the deadline not yet being replaced (or
	// whose replacement stalled), oldest first.
	Overdue []Overdue
	// Replacing counts nodes already going away (validly marked by us, or
	// being deleted by anyone).
	Replacing int
	// Retainted counts nodes the agents re-tainted (VerifiedLabel=false).
	Retainted int
	// FleetLimit and ReplaceLimit are the two budgets for this cluster size.
	FleetLimit, ReplaceLimit int
	// Replace are the overdue nodes that passed the gates on the cache; each
	// passes them again on a fresh read before its delete. Blocked says why
	// the others are not replaced (node name → a blocked reason).
	Replace []Overdue
	Blocked map[string]string
	// Unmark are nodes carrying a replacing annotation that is not a valid
	// mark for them (another incarnation or state, or not ours): removed.
	Unmark []*corev1.Node
	// NewlyFailed counts new nodes judged past the deadline for the first
	// time (circuit breaker failures).
	NewlyFailed int
	// Opened are the pools whose circuit breaker this scan opened.
	Opened []string
}

// Overdue is a node past the deadline.
type Overdue struct {
	Node  *corev1.Node
	Taint string
	Since time.Time

	marked bool // carries a valid mark: its replacement stalled, retried
}

// counts are the cluster-wide numbers the budget gates read.
type counts struct {
	retainted int // nodes the agents re-tainted (VerifiedLabel=false)
	inFlight  int // nodes going away: being deleted, or validly marked
	fleet     int // the fleet budget's limit
	replace   int // --max-replacing's limit
	// refused: an agent was refused a re-taint by the fleet budget within
	// the deadline (budgetRefused): the budget was used up, whatever the
	// labels count now.
	refused bool
	// suspended is the blocked reason the operator's suspend switch gives
	// (on, or unreadable: suspendBlocked), "" when it does not hold.
	suspended string
}

// countsOf counts the unverified nodes for a cluster of total nodes.
func (c *Controller) countsOf(nodes []*corev1.Node, total int) counts {
	cnt := counts{fleet: c.cfg.FleetBudget.Limit(total), replace: c.cfg.MaxReplacing.Limit(total)}
	for _, n := range nodes {
		if c.retainted(n) {
			cnt.retainted++
		}
		if _, marked := c.validMark(n); n.DeletionTimestamp != nil || marked {
			cnt.inFlight++
		}
	}
	return cnt
}

// retainted reports whether n counts against the agents' fleet budget: the
// agents re-tainted it and no operator bypassed it (as the agents count).
func (c *Controller) retainted(n *corev1.Node) bool {
	return n.Labels[c.cfg.VerifiedLabel] == "false" && !c.bypassed(n)
}

// gate returns why n may not be deleted now, or "" when every gate passes.
// The same gates hold for a first attempt and a retry, on the cache when
// planning and again on a fresh read right before the delete: unverified
// now, past the deadline since, not protected, never verified (or the
// explicit opt-in for nodes in service), its pool's circuit breaker closed,
// room in the agents' fleet budget and (unless dry-run) in --max-replacing.
// Gates that fail because the node is fine are "" reasons of their own
// (notUnverified, notOverdue), never reported as blocked.
//
// The fleet budget counts every re-tainted node, the candidate's own
// re-taint included: the agents never re-taint more than the budget, so
// "used up" is a state they do reach in a cluster-wide fault, and then
// nothing is replaced. With a budget of 1 (clusters under 20 nodes at the
// default 10 %), one re-tainted node holds every replacement: in a small
// cluster one node's fault cannot be told from the cluster's. And while an
// agent was refused a re-taint by the budget within the deadline, nothing
// is replaced either: the budget was used up even if a node has recovered
// or been bypassed since, and the nodes still failing are not at fault.
// While the operator's suspend switch is on, or cannot be read, nothing is
// replaced at all.
func (c *Controller) gate(n *corev1.Node, since time.Time, cnt counts, now time.Time) string {
	_, unverified := c.state(n)
	_, marked := c.validMark(n)
	inFlight := cnt.inFlight
	if marked {
		inFlight-- // a retry uses the slot its mark holds
	}
	switch {
	case !unverified || n.DeletionTimestamp != nil:
		return notUnverified
	case now.Sub(since) < c.cfg.Deadline:
		return notOverdue
	case cnt.suspended != "":
		return cnt.suspended
	case c.cfg.ProtectAnnotation != "" && n.Annotations[c.cfg.ProtectAnnotation] == "true":
		return blockedProtected
	case !c.neverVerified(n) && !c.cfg.ReplaceInService:
		return blockedInService
	case c.brks != nil && c.brks.of(c.pool(n)).open:
		return blockedBreaker
	case cnt.retainted >= cnt.fleet || cnt.refused:
		return blockedFleet
	case !c.cfg.DryRun && inFlight >= cnt.replace:
		return blockedMax
	}
	return ""
}

// Gate results that are not holds: the node is fine, or not yet due.
const (
	notUnverified = "not_unverified"
	notOverdue    = "not_overdue"
)

// plan decides, from the cached unverified nodes, which are overdue and
// which of those pass the gates now.
func (c *Controller) plan(nodes []*corev1.Node, total int, now time.Time) Plan {
	cnt := c.countsOf(nodes, total)
	cnt.refused = c.held
	cnt.suspended = c.suspended
	p := Plan{
		FleetLimit: cnt.fleet, ReplaceLimit: cnt.replace,
		Retainted: cnt.retainted, Replacing: cnt.inFlight,
		Blocked: map[string]string{},
	}
	live := make(map[types.UID]bool, len(nodes))
	for _, n := range nodes {
		live[n.UID] = true
		if n.DeletionTimestamp != nil {
			continue
		}
		_, marked := c.validMark(n)
		if _, annotated := n.Annotations[c.cfg.ReplacingAnnotation]; annotated && !marked {
			p.Unmark = append(p.Unmark, n)
		}
		taint, unverified := c.state(n)
		if !unverified {
			continue
		}
		since, failed := c.obs.since(n, now, c.cfg.Deadline)
		if failed {
			p.NewlyFailed++
			// Counted before anything is replaced in this scan.
			if pool := c.pool(n); c.brks.of(pool).record(true) {
				p.Opened = append(p.Opened, pool)
			}
		}
		if now.Sub(since) < c.cfg.Deadline || (marked && !c.stalled(n, now)) {
			continue
		}
		p.Overdue = append(p.Overdue, Overdue{Node: n, Taint: taint, Since: since, marked: marked})
	}
	c.obs.forget(live)
	forgetGone(c.noted, live)
	forgetGone(c.retried, live)
	forgetGone(c.freshHeld, live)
	sort.Slice(p.Overdue, func(i, j int) bool {
		if !p.Overdue[i].Since.Equal(p.Overdue[j].Since) {
			return p.Overdue[i].Since.Before(p.Overdue[j].Since)
		}
		return p.Overdue[i].Node.Name < p.Overdue[j].Node.Name
	})
	if c.cfg.Policy != PolicyReplace {
		return p
	}
	for _, o := range p.Overdue {
		if reason := c.gate(o.Node, o.Since, cnt, now); reason != "" {
			p.Blocked[o.Node.Name] = reason
			continue
		}
		p.Replace = append(p.Replace, o)
		if !c.cfg.DryRun && !o.marked {
			cnt.inFlight++
		}
	}
	return p
}

// stalled reports whether a validly marked node still not going away is due
// for another attempt: this replica has seen its mark for
// max(2×Interval, StallAfter) (the delete after the mark failed, or the
// replica that marked it stopped in between, or Karpenter has not acted)
// and not retried since. Timed on this replica's clock, not the mark's.
func (c *Controller) stalled(n *corev1.Node, now time.Time) bool {
	after := max(2*c.cfg.Interval, c.cfg.StallAfter)
	first, ok := c.retried[n.UID]
	if !ok {
		c.retried[n.UID] = now
		return false
	}
	return now.Sub(first) >= after
}

// forgetGone drops what a per-node map holds about nodes no longer present.
func forgetGone[V any](m map[types.UID]V, live map[types.UID]bool) {
	for uid := range m {
		if !live[uid] {
			delete(m, uid)
		}
	}
}
