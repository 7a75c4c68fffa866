package remediate

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Point 4: the breaker opens when the threshold share of the window never
// verified, holds every replacement, and closes (forgetting) when a new node
// verifies.
func TestBreaker(t *testing.T) {
	b := &breaker{cfg: Breaker{Threshold: 0.5, Window: 4}}
	steps := []struct {
		failed      bool
		wantChanged bool
		wantOpen    bool
	}{
		{true, false, false}, {false, false, false}, {true, true, true}, // 2 of 3 ≥ 2
		{true, false, true}, {false, true, false}, // a verified node closes it
		{true, false, false}, {true, true, true},
	}
	for i, s := range steps {
		if changed := b.record(s.failed); changed != s.wantChanged || b.open != s.wantOpen {
			t.Fatalf("step %d (failed=%v): changed %v open %v, want %v %v", i, s.failed, changed, b.open, s.wantChanged, s.wantOpen)
		}
	}
	off := &breaker{cfg: Breaker{Threshold: 0, Window: 4}}
	for range 10 {
		if off.record(true) || off.open {
			t.Fatal("a breaker turned off opened")
		}
	}
}

// New nodes past the deadline count as failures once each; past the
// threshold every replacement is held in the same scan.
func TestBreakerHoldsReplacementsInPlan(t *testing.T) {
	c := testController(t, PolicyReplace, "5", "50%", false)
	c.brks = newBreakers(Breaker{Threshold: 0.5, Window: 4})
	a := node("a", time.Hour, taint(startup))
	if p := c.plan(watched(c, a), 20, t0); !slices.Equal(names(p.Replace), []string{"a"}) || c.brks.of("").open {
		t.Fatalf("replace %v open %v: one failure of 4 replaces", names(p.Replace), c.brks.of("").open)
	}
	b := node("b", time.Hour, taint(startup))
	retainted := node("r", time.Hour, taint(unhealthy), label("node-ready/verified", "false"))
	p := c.plan(watched(c, a, b, retainted), 20, t0.Add(time.Second))
	if !c.brks.of("").open || p.Blocked["a"] != blockedBreaker || p.Blocked["b"] != blockedBreaker || p.Blocked["r"] != blockedInService {
		t.Fatalf("open %v, blocked %v: want the breaker open and every new node held (the re-tainted one is in service)", c.brks.of("").open, p.Blocked)
	}
	if c.brks.of("").failures() != 2 {
		t.Errorf("failures %d, want 2 (each new node once, the re-tainted one not at all)", c.brks.of("").failures())
	}
}

func TestParseBreakerThreshold(t *testing.T) {
	for in, want := range map[string]float64{"off": 0, "50%": 0.5, "100%": 1, "12.5%": 0.125} {
		if got, err := ParseBreakerThreshold(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0%", "50", "101%", "-5%", "x%"} {
		if _, err := ParseBreakerThreshold(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func inPool(pool string) nodeOpt { return label("karpenter.sh/nodepool", pool) }

// A broken pool beside a healthy one: its breaker opens on its own
// failures, the healthy pool's nodes are still replaced, and a new node of
// the healthy pool that verifies does not close the broken pool's breaker.
func TestBreakerPerPool(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{
		node("a1", time.Hour, taint(startup), inPool("a")), node("a2", time.Hour, taint(startup), inPool("a")),
		node("b1", time.Hour, taint(startup), inPool("b")),
		node("b-ok", time.Minute, inPool("b"), label("node-ready/verified", "true")),
	})
	f.c.brks = newBreakers(Breaker{Threshold: 0.5, Window: 4})
	f.c.cfg.MaxReplacing = mustBudget(t, "5")
	f.scan(f.cached("a1", "a2", "b1")...)
	if f.node("a1") == nil || f.node("a2") == nil {
		t.Fatal("a node of the broken pool was replaced: its breaker did not open on its own two failures")
	}
	if f.node("b1") != nil {
		t.Fatal("the healthy pool's overdue node was held by the other pool's breaker")
	}
	if got := testutilCircuit(f); got != 1 {
		t.Errorf("node_remediation_circuit_open = %v, want 1 (one pool open)", got)
	}
	// A new node of pool b verifies (the informer saw it leave the unverified set).
	ok := f.node("b-ok")
	f.c.obs.left = append(f.c.obs.left, leaver{name: ok.Name, uid: ok.UID, fresh: true})
	f.scan(f.cached("a1", "a2")...)
	if !f.c.brks.of("karpenter.sh/nodepool=a").open || f.node("a1") == nil || f.node("a2") == nil {
		t.Fatal("a verified node of another pool closed the broken pool's breaker")
	}
}

// A new leader rebuilds the breaker from what the cluster shows: a node an
// earlier leader marked as replacing, still going away, and a never-verified
// node past the deadline by its age are two failures of their pool, so the
// breaker is open from the start instead of closed.
func TestNewLeaderRebuildsTheBreaker(t *testing.T) {
	for _, rebuild := range []bool{false, true} {
		c := testController(t, PolicyReplace, "5", "10%", false)
		c.brks = newBreakers(Breaker{Threshold: 0.5, Window: 4})
		going := node("going", 2*time.Hour, taint(startup), marked(), deleting())
		old := node("old", time.Hour, taint(startup))
		nodes := []*corev1.Node{going, old}
		// This replica began leading at t0 and watched nothing before.
		c.obs = newObserver(c, t0)
		for _, n := range nodes {
			c.obs.observe(n, t0)
		}
		if rebuild {
			if opened := c.rebuild(nodes, t0); !slices.Equal(opened, []string{""}) {
				t.Fatalf("rebuild opened %q, want the pool of nodes without a pool label", opened)
			}
		}
		p := c.plan(nodes, 20, t0.Add(31*time.Minute))
		held := p.Blocked["old"] == blockedBreaker && len(p.Replace) == 0
		if held != rebuild {
			t.Errorf("rebuild %v: replace %v blocked %v", rebuild, names(p.Replace), p.Blocked)
		}
		if rebuild && p.NewlyFailed != 0 {
			t.Errorf("newly failed %d after the rebuild counted old, want 0 (counted once)", p.NewlyFailed)
		}
	}
}
