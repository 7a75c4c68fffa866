package remediate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

// note records an Event about n and reports true, unless n's last note had
// the same key (a state is told once, not every scan).
func (c *Controller) note(n *corev1.Node, key, eventType, reason, format string, args ...any) bool {
	if c.noted[n.UID] == key {
		return false
	}
	c.noted[n.UID] = key
	if key == "report" {
		c.actions.WithLabelValues("report", "success").Inc()
		c.log.Warn("node unverified past the deadline", "node", n.Name, "policy", c.cfg.Policy)
	}
	if c.cfg.Recorder != nil {
		c.cfg.Recorder.Eventf(n, nil, eventType, reason, "Remediate", "%s", eventnote.Shorten(fmt.Sprintf(format, args...)))
	}
	return true
}

// tellFleet logs when the fleet budget starts and stops holding
// replacements, once per change.
func (c *Controller) tellFleet(p Plan, tripped bool) {
	if tripped == c.tripped {
		return
	}
	c.tripped = tripped
	if tripped {
		c.log.Warn("not replacing overdue nodes: the agents' fleet budget is used up, so the fault is most likely the cluster's",
			"retainted_nodes", p.Retainted, "fleet_limit", p.FleetLimit, "overdue_nodes", len(p.Overdue))
	} else {
		c.log.Info("fleet budget no longer used up; replacements may resume", "retainted_nodes", p.Retainted, "fleet_limit", p.FleetLimit)
	}
}

// tellBreakerOpen says once, by log and by an Event on the first overdue
// node of the pool it holds, that pool's circuit breaker stopped
// replacements.
func (c *Controller) tellBreakerOpen(p Plan, pool string) {
	msg := c.breakerText(pool)
	c.log.Warn("circuit breaker open: not replacing nodes of the pool until a new node of it verifies", "pool", pool, "reason", msg)
	if c.cfg.Recorder == nil {
		return
	}
	for _, o := range p.Overdue {
		if c.pool(o.Node) == pool {
			c.cfg.Recorder.Eventf(o.Node, nil, corev1.EventTypeWarning, api.EventRemediationPaused, "Remediate", "%s",
				eventnote.Shorten("replacing stopped in pool "+poolName(pool)+": "+msg+"; it resumes when a new node of the pool verifies"))
			return
		}
	}
}

func (c *Controller) breakerText(pool string) string {
	b := c.brks.of(pool)
	return fmt.Sprintf("%d of the last %d new nodes of pool %s never verified within --unverified-deadline=%s (--remediation-breaker-threshold=%g%% of --remediation-breaker-window=%d)",
		b.failures(), len(b.outcomes), poolName(pool), c.cfg.Deadline, c.cfg.Breaker.Threshold*100, c.cfg.Breaker.Window)
}

// poolName is how a pool is said: nodes without a pool label share one.
func poolName(pool string) string {
	if pool == "" {
		return "(nodes without a pool label)"
	}
	return pool
}

func (c *Controller) blockedText(reason string, p Plan, n *corev1.Node) string {
	switch reason {
	case blockedProtected:
		return "the node is protected from deletion"
	case blockedSuspended, blockedSuspendUnreadable:
		why := c.suspend.Why()
		if why == "" { // seen only on the fresh read before the delete
			why = "the operator's suspend switch holds"
		}
		return "nothing is replaced while " + why + " (kubectl node-ready resume ends it)"
	case blockedFleet:
		return fmt.Sprintf("%d nodes are re-tainted, the agents' fleet budget of %d is used up: a cluster-wide fault is not this node's", p.Retainted, p.FleetLimit)
	case blockedBreaker:
		return "the circuit breaker is open: " + c.breakerText(c.pool(n))
	case blockedInService:
		return "the node verified once and serves workloads; remediation never deletes it (--remediation-replace-retainted replaces it through its Karpenter NodeClaim, which drains it)"
	case blockedWorkloads:
		return "it runs pods other than DaemonSet and mirror pods; remediation deletes only a node that runs none"
	case blockedNoDrain:
		return "it verified once and has no Karpenter NodeClaim to drain it through; remediation never deletes such a Node itself"
	default:
		return fmt.Sprintf("%d nodes are being replaced (--max-replacing allows %d)", p.Replacing+len(p.Replace), p.ReplaceLimit)
	}
}
