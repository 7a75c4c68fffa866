package remediate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

// scan checks the API server answers, then plans and acts once.
func (c *Controller) scan(ctx context.Context, nodes []*corev1.Node) {
	now := c.now()
	if !c.contact(ctx, now) {
		c.scans.WithLabelValues("api_unreachable").Inc()
		return
	}
	c.resolveLeavers(ctx)
	total := len(nodes)
	if c.cfg.TotalNodes != nil {
		total = max(total, c.cfg.TotalNodes())
	}
	wasOpen := c.brk.open
	p := c.plan(nodes, total, now)
	c.claimList = &claimCache{}
	defer func() { c.claimList = nil }()

	blocked := map[string]int{}
	for _, reason := range p.Blocked {
		blocked[reason]++
	}
	for _, reason := range blockedReasons {
		c.blocked.WithLabelValues(reason).Set(float64(blocked[reason]))
	}
	c.replacing.Set(float64(p.Replacing))
	for _, n := range p.Unmark {
		c.removeMark(ctx, n, "the annotation is not a mark of this controller for this node's current incarnation and state")
	}
	c.tellFleet(p, blocked[blockedFleet] > 0)
	if c.brk.open && !wasOpen {
		c.tellBreakerOpen(p)
	}

	replaced := 0
	for _, o := range p.Overdue {
		n := o.Node
		age := now.Sub(o.Since).Round(time.Second)
		if c.cfg.Policy == PolicyReport {
			c.note(n, "report", corev1.EventTypeWarning, ReasonUnverified,
				"carries %s for %s, past --unverified-deadline=%s; policy report: nothing is done", o.Taint, age, c.cfg.Deadline)
			continue
		}
		if reason, ok := p.Blocked[n.Name]; ok {
			c.note(n, "blocked:"+reason, corev1.EventTypeWarning, ReasonUnverified,
				"carries %s for %s, past --unverified-deadline=%s; not replaced: %s", o.Taint, age, c.cfg.Deadline, c.blockedText(reason, p))
			continue
		}
		if c.replace(ctx, o, total, age) {
			replaced++
		}
	}
	c.overdue.Set(float64(len(p.Overdue) - replaced))
	c.circuitOpen.Set(boolGauge(c.brk.open))
	c.scans.WithLabelValues("ok").Inc()
}

// contact asks the API server whether it serves. After an outage (or a gap
// in this replica's scans) every node's time restarts: the agents could not
// verify while the control plane was away, so nodes get a fair chance. It
// reports whether to go on with the scan.
func (c *Controller) contact(ctx context.Context, now time.Time) bool {
	err := c.probe(ctx)
	maxGap := 3*c.cfg.Interval + 10*time.Second
	if c.obs.contacted(err == nil, now, maxGap) {
		c.log.Warn("the API server answers again after an outage; every unverified node gets a full deadline from now",
			"unverified_deadline", c.cfg.Deadline)
	}
	if err != nil && !c.down {
		c.log.Warn("the API server does not answer; judging nothing until it does", "error", err)
	}
	c.down = err != nil
	return err == nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
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

// resolveLeavers reads again each node that left the unverified set since
// the last scan: a new node that verified closes the circuit breaker, and a
// node that is no longer unverified loses its replacing mark.
func (c *Controller) resolveLeavers(ctx context.Context) {
	for _, l := range c.obs.leavers() {
		n, err := c.client.CoreV1().Nodes().Get(ctx, l.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && n.UID != l.uid) {
			continue
		}
		if err != nil {
			c.log.Warn("cannot read a node that left the unverified set", "node", l.name, "error", err)
			continue
		}
		if _, unverified := c.state(n); unverified || n.DeletionTimestamp != nil {
			continue
		}
		if l.fresh && n.Labels[c.cfg.VerifiedLabel] == "true" && c.brk.record(false) {
			c.log.Info("circuit breaker closed: a new node verified; replacements may resume", "node", n.Name)
			if c.cfg.Recorder != nil {
				c.cfg.Recorder.Eventf(n, nil, corev1.EventTypeNormal, ReasonResumed, "Remediate", "%s",
					"this new node verified: replacing nodes that never verify resumes")
			}
		}
		c.removeMark(ctx, n, "the node left the unverified set")
	}
}

// removeMark removes the replacing annotation from n (if it still holds the
// value n was read with), logging why.
func (c *Controller) removeMark(ctx context.Context, n *corev1.Node, why string) {
	value, ok := n.Annotations[c.cfg.ReplacingAnnotation]
	if !ok {
		return
	}
	if err := c.unmark(ctx, n); err != nil {
		c.log.Warn("cannot remove a replacing mark", "node", n.Name, "why", why, "error", err)
		c.actions.WithLabelValues("unmark", "error").Inc()
		return
	}
	c.log.Info("removed a replacing mark", "node", n.Name, "why", why, "annotation", c.cfg.ReplacingAnnotation, "value", value)
	c.actions.WithLabelValues("unmark", "success").Inc()
}

// freshCounts reads the unverified nodes from the API server (a consistent
// read, not the cache) for the budget gates right before a delete.
func (c *Controller) freshCounts(ctx context.Context, total int) (counts, error) {
	list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: c.cfg.VerifiedLabel + "!=true"})
	if err != nil {
		return counts{}, fmt.Errorf("list unverified nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	return c.countsOf(nodes, max(total, len(nodes))), nil
}

// replace deletes the node's NodeClaim or the Node (or, in dry-run, says
// which it would), after the gates pass again on a fresh read of the node
// and the budgets; the node is marked first (guarded by that read's
// resourceVersion) so it counts against the budget even if this replica
// stops right after, and the Node delete is guarded by the marked node's
// UID and resourceVersion. It reports whether the node is now going away.
func (c *Controller) replace(ctx context.Context, o Overdue, total int, age time.Duration) bool {
	log := c.log.With("node", o.Node.Name, "uid", string(o.Node.UID), "taint", o.Taint, "unverified_for", age.String())
	if c.cfg.DryRun && c.noted[o.Node.UID] == "dry-run" {
		return false // told already
	}
	n, err := c.client.CoreV1().Nodes().Get(ctx, o.Node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && n.UID != o.Node.UID) {
		return false
	}
	var cnt counts
	if err == nil {
		cnt, err = c.freshCounts(ctx, total)
	}
	if err != nil {
		log.Warn("cannot read the node again before replacing it; trying again next scan", "error", err)
		c.actions.WithLabelValues(actionFor(true), "error").Inc()
		return false
	}
	now := c.now()
	taint, _ := c.state(n)
	since, _ := c.obs.since(n, now, c.cfg.Deadline)
	if reason := c.gate(n, since, cnt, now); reason != "" {
		if c.freshHeld[n.UID] != reason { // once per node and reason, not every scan
			c.freshHeld[n.UID] = reason
			log.Info("not replacing: a gate closed on a fresh read of the node", "gate", reason)
		}
		return false
	}
	delete(c.freshHeld, n.UID)
	claim, err := c.nodeClaim(ctx, n)
	if err != nil {
		log.Warn("cannot look up the node's NodeClaim; trying again next scan", "error", err)
		c.actions.WithLabelValues(actionFor(true), "error").Inc()
		return false
	}
	target := "Node " + n.Name
	if claim != nil {
		target = "NodeClaim " + claim.name
		if claim.deleting {
			target += " (already being deleted)"
		}
	}
	if c.cfg.DryRun {
		if c.note(n, "dry-run", corev1.EventTypeWarning, ReasonUnverified,
			"carries %s for %s, past --unverified-deadline=%s; dry run: would delete %s", taint, age, c.cfg.Deadline, target) {
			log.Info("dry run: would replace the node", "delete", target)
			c.actions.WithLabelValues("dry_run", "success").Inc()
		}
		return false
	}
	action := actionFor(claim == nil)
	_, retry := c.validMark(n)
	if !retry {
		if n, err = c.mark(ctx, n, c.newMark(n, taint, now)); err != nil {
			log.Warn("cannot mark the node as being replaced; judged again next scan", "error", err)
			c.actions.WithLabelValues(action, "error").Inc()
			return false
		}
	}
	c.retried[n.UID] = now
	if err := c.delete(ctx, n, claim); err != nil {
		log.Error("replacing the node failed; judged again next scan", "delete", target, "error", err)
		c.actions.WithLabelValues(action, "error").Inc()
		c.note(n, "failed", corev1.EventTypeWarning, ReasonReplaceFailed, "deleting %s failed: %v", target, err)
		// Even when stopping: a mark without a delete would hold the budget.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		c.removeMark(uctx, n, "its delete failed")
		return false
	}
	if retry {
		log.Warn("a node marked as replacing was still not going away; deleted again after the gates passed", "delete", target)
	} else {
		log.Warn("replacing a node that never verified", "delete", target)
	}
	c.actions.WithLabelValues(action, "success").Inc()
	c.note(n, "replacing", corev1.EventTypeWarning, ReasonReplacing,
		"carried %s for %s, past --unverified-deadline=%s: deleted %s", taint, age, c.cfg.Deadline, target)
	return true
}

// delete deletes claim (unless Karpenter is deleting it already) or, with
// none, the Node, guarded by the Node's UID and resourceVersion (the NodeClaim
// by its UID); gone already is success.
func (c *Controller) delete(ctx context.Context, n *corev1.Node, claim *claimRef) error {
	var err error
	switch {
	case claim != nil && claim.deleting:
		return nil
	case claim != nil:
		err = c.dyn.Resource(NodeClaims).Delete(ctx, claim.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &claim.uid}})
	default:
		err = c.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &n.UID, ResourceVersion: &n.ResourceVersion},
		})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func actionFor(node bool) string {
	if node {
		return "delete_node"
	}
	return "delete_nodeclaim"
}

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
