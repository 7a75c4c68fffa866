package remediate

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A node carrying a previous key (created, or re-tainted, before the keys
// changed) is unverified like one carrying the configured key: the agent
// removes the key when the node verifies, so past the deadline it is
// reported or replaced, and a new node carrying a previous startup key
// counts for the circuit breaker like any new node.
func TestPreviousKeysCountAsUnverified(t *testing.T) {
	const (
		caStartup = "startup-taint.cluster-autoscaler.kubernetes.io/node-ready"
		caStatus  = "status-taint.cluster-autoscaler.kubernetes.io/node-ready"
	)
	c := testController(t, PolicyReplace, "5", "50%", false)
	c.cfg.StartupTaints = []string{caStartup, startup}
	c.cfg.UnhealthyTaints = []string{caStatus, unhealthy}
	nodes := watched(c,
		node("seed-startup", time.Hour, taint(startup)),
		node("seed-unhealthy", time.Hour, taint(unhealthy), label("node-ready/verified", "false")),
		node("current", time.Hour, taint(caStartup)),
		node("verified", time.Hour, taint(startup), label("node-ready/verified", "true")),
		node("someone-elses", time.Hour, taint("node-ready/other")),
	)
	p := c.plan(nodes, 10, t0)
	got := names(p.Overdue)
	slices.Sort(got)
	if want := []string{"current", "seed-startup", "seed-unhealthy"}; !slices.Equal(got, want) {
		t.Errorf("overdue %v, want %v", got, want)
	}
	for _, o := range p.Overdue {
		if o.Node.Name == "seed-startup" && o.Taint != startup {
			t.Errorf("seed-startup judged on taint %q, want %q (named in its Event)", o.Taint, startup)
		}
	}
	fresh := func(n *corev1.Node) bool { return c.obs.seen[n.UID].fresh }
	if !fresh(nodes[0]) || fresh(nodes[1]) {
		t.Errorf("fresh: seed-startup %v, seed-unhealthy %v; want a new node and a re-tainted one", fresh(nodes[0]), fresh(nodes[1]))
	}
}
