package remediate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

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

// tellBreakerOpen says once, by log and by an Event on the first node it
// holds, that the circuit breaker stopped replacements.
func (c *Controller) tellBreakerOpen(p Plan) {
	msg := c.breakerText()
	c.log.Warn("circuit breaker open: not replacing nodes until a new node verifies", "reason", msg)
	if c.cfg.Recorder == nil || len(p.Overdue) == 0 {
		return
	}
	c.cfg.Recorder.Eventf(p.Overdue[0].Node, nil, corev1.EventTypeWarning, ReasonPaused, "Remediate", "%s",
		eventnote.Shorten("replacing stopped: "+msg+"; it resumes when a new node verifies"))
}

func (c *Controller) breakerText() string {
	return fmt.Sprintf("%d of the last %d new nodes never verified within --unverified-deadline=%s (--remediation-breaker-threshold=%g%% of --remediation-breaker-window=%d)",
		c.brk.failures(), len(c.brk.outcomes), c.cfg.Deadline, c.cfg.Breaker.Threshold*100, c.cfg.Breaker.Window)
}

func (c *Controller) blockedText(reason string, p Plan) string {
	switch reason {
	case blockedProtected:
		return "the node is protected from deletion"
	case blockedFleet:
		return fmt.Sprintf("%d nodes are re-tainted, the agents' fleet budget of %d is used up: a cluster-wide fault is not this node's", p.Retainted, p.FleetLimit)
	case blockedBreaker:
		return "the circuit breaker is open: " + c.breakerText()
	default:
		return fmt.Sprintf("%d nodes are being replaced (--max-replacing allows %d)", p.Replacing+len(p.Replace), p.ReplaceLimit)
	}
}
