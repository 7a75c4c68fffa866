package remediate

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

// scan checks the API server answers, then plans and acts once, and counts
// and times the scan by its result. The duration is observed before the
// counter moves, so whoever sees the counter move sees the duration too.
// It is timed on the wall clock, not c.clock: what it costs, not what the
// deadlines are judged by.
func (c *Controller) scan(ctx context.Context, nodes []*corev1.Node) {
	start := time.Now()
	result := c.scanOnce(ctx, nodes)
	c.scanSeconds.WithLabelValues(result).Observe(time.Since(start).Seconds())
	c.scans.WithLabelValues(result).Inc()
}

// scanOnce is one scan; it returns its result label.
func (c *Controller) scanOnce(ctx context.Context, nodes []*corev1.Node) string {
	now := c.clock.Now()
	if !c.contact(ctx, now) {
		return scanUnreachable
	}
	c.resolveLeavers(ctx)
	total := len(nodes)
	if c.cfg.TotalNodes != nil {
		total = max(total, c.cfg.TotalNodes())
	}
	// An unreadable Lease holds (c.held is true); budgetRefused logs it.
	c.held, _ = c.budgetRefused(ctx, now)
	c.suspendEpisode(c.switchState(), now)
	c.fleetEpisode(nodes, total, now)
	p := c.plan(nodes, total, now)
	c.claimList = &claimCache{}
	defer func() { c.claimList = nil }()

	for _, n := range p.Unmark {
		c.removeMark(ctx, n, "the annotation is not a mark of this controller for this node's current incarnation and state")
	}
	c.tellFleet(p, slices.Contains(slices.Collect(maps.Values(p.Blocked)), blockedFleet))
	for _, pool := range p.Opened {
		c.tellBreakerOpen(p, pool)
	}

	replaced := 0
	for _, o := range p.Overdue {
		n := o.Node
		age := now.Sub(o.Since).Round(time.Second)
		if c.cfg.Policy == PolicyReport {
			c.note(n, "report", corev1.EventTypeWarning, api.EventNodeUnverifiedPastDeadline,
				"carries %s for %s, past --unverified-deadline=%s; policy report: nothing is done", o.Taint, age, c.cfg.Deadline)
			continue
		}
		reason, blocked := p.Blocked[n.Name]
		if !blocked {
			var gone bool
			if gone, reason = c.replace(ctx, o, total, age); gone {
				replaced++
			}
			if reason == "" {
				continue
			}
			p.Blocked[n.Name] = reason // held on the fresh read
		}
		c.note(n, "blocked:"+reason, corev1.EventTypeWarning, api.EventNodeUnverifiedPastDeadline,
			"carries %s for %s, past --unverified-deadline=%s; not replaced: %s", o.Taint, age, c.cfg.Deadline, c.blockedText(reason, p, n))
	}
	counted := map[string]int{}
	for _, reason := range p.Blocked {
		counted[reason]++
	}
	for _, reason := range blockedReasons {
		c.blocked.WithLabelValues(reason).Set(float64(counted[reason]))
	}
	c.replacing.Set(float64(p.Replacing))
	c.overdue.Set(float64(len(p.Overdue) - replaced))
	c.circuitOpen.Set(float64(c.brks.open()))
	return scanOK
}

// fleetEpisode restarts every node's time when the agents' fleet budget has
// room again after it was used up. While it was, the fault was most likely
// the cluster's (CoreDNS, the CNI, a resolver), and the nodes still
// re-tainted when it ends recover one by one: without a fresh deadline the
// last of them would become due the moment the first recovered freed the
// budget, and be replaced while recovering.
func (c *Controller) fleetEpisode(nodes []*corev1.Node, total int, now time.Time) {
	cnt := c.countsOf(nodes, total)
	full := cnt.retainted >= cnt.fleet || c.held
	if c.fleetFull && !full {
		c.obs.restart(now)
		c.log.Warn("the agents' fleet budget has room again after it was used up; every unverified node gets a full deadline from now",
			"retainted_nodes", cnt.retainted, "fleet_limit", cnt.fleet, "unverified_deadline", c.cfg.Deadline,
			"last_refusal", c.refused.value)
	}
	c.fleetFull = full
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
		if pool := c.pool(n); l.fresh && n.Labels[c.cfg.VerifiedLabel] == "true" && c.brks.of(pool).record(false) {
			c.log.Info("circuit breaker closed: a new node of the pool verified; replacements in it may resume", "node", n.Name, "pool", pool)
			if c.cfg.Recorder != nil {
				c.cfg.Recorder.Eventf(n, nil, corev1.EventTypeNormal, api.EventRemediationResumed, "Remediate", "%s",
					eventnote.Shorten("this new node verified: replacing nodes of its pool "+poolName(pool)+" that never verify resumes"))
			}
		}
		c.removeMark(ctx, n, "the node left the unverified set")
	}
}
