package remediate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Point 2 (clocks): a node is dated by when this controller first saw it
// unverified, so a node whose creationTimestamp (the API server's clock,
// skewed against ours) or condition (its own clock) is years in the past is
// not overdue at first sight, but a deadline later; the memory goes with the
// node.
func TestDatedByFirstSightNotByForeignClocks(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "50%", false)
	old := node("years-behind", 3*365*24*time.Hour, taint(startup))
	sick := node("sick", 3*365*24*time.Hour, taint(unhealthy), label("node-ready/verified", "false"), failingSince(3*365*24*time.Hour))
	ahead := node("ahead", -3*365*24*time.Hour, taint(startup)) // created "in the future"
	nodes := []*corev1.Node{old, sick, ahead}
	if p := c.plan(nodes, 10, t0); len(p.Overdue) != 0 {
		t.Fatalf("overdue at first sight: %v", names(p.Overdue))
	}
	if p := c.plan(nodes, 10, t0.Add(29*time.Minute)); len(p.Overdue) != 0 {
		t.Fatalf("overdue before a deadline since first sight: %v", names(p.Overdue))
	}
	if p := c.plan(nodes, 10, t0.Add(31*time.Minute)); len(p.Overdue) != 3 {
		t.Fatalf("overdue %v a deadline after first sight, want all three", names(p.Overdue))
	}
	c.plan(nil, 10, t0.Add(32*time.Minute))
	if len(c.obs.seen) != 0 {
		t.Fatalf("first-sight memory kept for nodes that are gone: %v", c.obs.seen)
	}
}

// A node that verified and is re-tainted starts a new episode: its time
// restarts, as does a node whose state changed (startup to unhealthy).
func TestNewEpisodeRestartsTheClock(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "50%", false)
	n := node("flap", time.Hour, taint(unhealthy), label("node-ready/verified", "false"))
	c.obs.observe(n, t0.Add(-time.Hour))
	c.obs.leave(n) // verified: left the label-selected set
	if p := c.plan([]*corev1.Node{n}, 10, t0); len(p.Overdue) != 0 {
		t.Fatalf("a brief re-taint after verifying is overdue at once: %v", names(p.Overdue))
	}
	s := node("state", time.Hour, taint(startup))
	c.obs.observe(s, t0.Add(-time.Hour))
	changed := s.DeepCopy() // the same node, re-tainted as unhealthy
	changed.Spec.Taints, changed.Labels["node-ready/verified"] = nil, "false"
	taint(unhealthy)(changed)
	if p := c.plan([]*corev1.Node{changed}, 10, t0); len(p.Overdue) != 0 {
		t.Fatalf("a node whose state changed kept its old time: %v", names(p.Overdue))
	}
}

// Point 3: after the API server failed to answer, or after a gap in this
// replica's contact with it, every node gets a full deadline again; a new
// leader (a new observer) starts from its own start.
func TestFairChanceAfterOutage(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "50%", false)
	nodes := watched(c, node("a", 2*time.Hour, taint(startup)))
	if p := c.plan(nodes, 10, t0); len(p.Overdue) != 1 {
		t.Fatalf("not overdue before the outage")
	}
	gap := 2 * time.Minute
	if c.obs.contacted(false, t0, gap) {
		t.Fatal("a failed contact resumed the view")
	}
	if !c.obs.contacted(true, t0.Add(10*time.Second), gap) {
		t.Fatal("the first answer after a failure did not resume the view")
	}
	if p := c.plan(nodes, 10, t0.Add(10*time.Second)); len(p.Overdue) != 0 {
		t.Fatalf("overdue right after the outage: %v", names(p.Overdue))
	}
	if p := c.plan(nodes, 10, t0.Add(10*time.Second+31*time.Minute)); len(p.Overdue) != 1 {
		t.Fatalf("not overdue a deadline after the outage")
	}
	if c.obs.contacted(true, t0.Add(time.Minute), gap) {
		t.Fatal("a contact within the gap resumed the view")
	}
	if !c.obs.contacted(true, t0.Add(2*time.Hour), gap) {
		t.Fatal("a contact after a long gap (this replica stalled) did not resume the view")
	}
	fresh := newObserver(c, t0)
	c.obs = fresh
	if p := c.plan(nodes, 10, t0.Add(time.Minute)); len(p.Overdue) != 0 {
		t.Fatalf("a new leader judged a node it had not watched for a deadline: %v", names(p.Overdue))
	}
}
