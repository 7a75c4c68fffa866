package remediate

import (
	"slices"
	"testing"
	"time"
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
	c.brk = &breaker{cfg: Breaker{Threshold: 0.5, Window: 4}}
	a := node("a", time.Hour, taint(startup))
	if p := c.plan(watched(c, a), 20, t0); !slices.Equal(names(p.Replace), []string{"a"}) || c.brk.open {
		t.Fatalf("replace %v open %v: one failure of 4 replaces", names(p.Replace), c.brk.open)
	}
	b := node("b", time.Hour, taint(startup))
	retainted := node("r", time.Hour, taint(unhealthy), label("node-ready/verified", "false"))
	p := c.plan(watched(c, a, b, retainted), 20, t0.Add(time.Second))
	if !c.brk.open || p.Blocked["a"] != blockedBreaker || p.Blocked["b"] != blockedBreaker || p.Blocked["r"] != blockedBreaker {
		t.Fatalf("open %v, blocked %v: want the breaker open and every node held", c.brk.open, p.Blocked)
	}
	if c.brk.failures() != 2 {
		t.Errorf("failures %d, want 2 (each new node once, the re-tainted one not at all)", c.brk.failures())
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
