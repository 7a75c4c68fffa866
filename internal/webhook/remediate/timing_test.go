package remediate

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/clocktest"
)

// Remediation's timing rules through Lead on a fake clock: the scans run
// Interval apart on the controller's clock, and the test steps it one
// interval at a time (a larger step is a replica that stalled, which
// restarts every node's time: contact's rule). Thirty minutes of scans
// take milliseconds.

// leadOnFakeClock runs f's controller as leader until the test ends and
// returns once its first scan is done; goleak then checks Lead left
// nothing running.
func leadOnFakeClock(t *testing.T, f *fixture) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.c.Lead(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Lead: %v", err)
		}
		goleak.VerifyNone(t, ignore)
	})
	clocktest.Await(t, f.clock, 1) // the timer of the next scan
	if got := testutilScans(f, scanOK); got != 1 {
		t.Fatalf("%v scans when Lead started, want 1", got)
	}
}

// scanUntil steps f's clock an interval at a time until it reads at, one
// scan each, and fails if cond stops holding after any of them.
func scanUntil(t *testing.T, f *fixture, at time.Time, what string, cond func() bool) {
	t.Helper()
	for f.clock.Now().Before(at) {
		clocktest.Step(t, f.clock, f.c.cfg.Interval, 1)
		if !cond() {
			t.Fatalf("%s: not so after the scan at +%s", what, f.clock.Now().Sub(t0))
		}
	}
}

func present(f *fixture, name string) func() bool { return func() bool { return f.node(name) != nil } }

// TestNewLeaderGivesAFullDeadlineOnTheClock: a node that never verified,
// created long before this replica began leading, is judged from the
// leader's start: kept at every scan before the deadline, replaced at the
// scan that reaches it.
func TestNewLeaderGivesAFullDeadlineOnTheClock(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("old", 10*time.Hour, taint(startup))})
	leadOnFakeClock(t, f)
	scanUntil(t, f, t0.Add(f.c.cfg.Deadline-f.c.cfg.Interval), "old kept within a deadline of the leader's start", present(f, "old"))
	clocktest.Step(t, f.clock, f.c.cfg.Interval, 1)
	if f.node("old") != nil {
		t.Fatalf("old still present at the scan a deadline after the leader started")
	}
}

// TestOutageGivesAFullDeadlineOnTheClock: while the API server does not
// answer nothing is judged, and when it answers again every node gets a
// full deadline from then.
func TestOutageGivesAFullDeadlineOnTheClock(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Hour, taint(startup))})
	leadOnFakeClock(t, f)
	scanUntil(t, f, t0.Add(20*time.Minute), "n kept", present(f, "n"))
	f.probeErr = errBoom
	scanUntil(t, f, t0.Add(25*time.Minute), "n kept during the outage", present(f, "n"))
	f.probeErr = nil
	clocktest.Step(t, f.clock, f.c.cfg.Interval, 1)
	back := f.clock.Now()
	if unreachable := testutilScans(f, scanUnreachable); unreachable != 10 {
		t.Errorf("%v unreachable scans, want 10 (20m30s to 25m)", unreachable)
	}
	scanUntil(t, f, back.Add(f.c.cfg.Deadline-f.c.cfg.Interval), "n kept within a deadline of the API server's return", present(f, "n"))
	clocktest.Step(t, f.clock, f.c.cfg.Interval, 1)
	if f.node("n") != nil {
		t.Fatalf("n still present a deadline after the API server answered again")
	}
}

// TestBreakerJudgesAtTheDeadlineOnTheClock: new nodes of a pool that never
// verify are counted against its circuit breaker by the scan that finds
// them past the deadline, before anything is replaced in it: the breaker
// opens then and holds them.
func TestBreakerJudgesAtTheDeadlineOnTheClock(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("a", 0, taint(startup)), node("b", 0, taint(startup))})
	f.c.cfg.Breaker = Breaker{Threshold: 0.5, Window: 4}
	f.c.cfg.MaxReplacing = mustBudget(t, "2")
	leadOnFakeClock(t, f)
	closed := func() bool { return testutilCircuit(f) == 0 && f.node("a") != nil && f.node("b") != nil }
	scanUntil(t, f, t0.Add(f.c.cfg.Deadline-f.c.cfg.Interval), "breaker closed, nodes kept", closed)
	clocktest.Step(t, f.clock, f.c.cfg.Interval, 1)
	if testutilCircuit(f) != 1 || f.node("a") == nil || f.node("b") == nil || gauge(f, blockedBreaker) != 2 {
		t.Errorf("at the deadline: circuit open %v, a present %v, b present %v, held by the breaker %v; want 1, true, true, 2",
			testutilCircuit(f), f.node("a") != nil, f.node("b") != nil, gauge(f, blockedBreaker))
	}
}

// TestStalledReplacementRetriedAfterStallAfter: a replacement that was
// marked and whose NodeClaim was deleted, but whose node stays (Karpenter
// did not act), is tried again --remediation-stall-after after this
// replica first saw the mark, not sooner: here 5 m, not the 1 m that
// 2×--remediation-interval gives.
func TestStalledReplacementRetriedAfterStallAfter(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("stuck", time.Hour, taint(startup))}, claim("claim-stuck", "stuck", ""))
	f.c.cfg.NodeClaims = true
	f.c.cfg.StallAfter = 5 * time.Minute
	claimDeletes := func() int {
		n := 0
		for _, a := range f.dyn.Actions() {
			if a.GetVerb() == "delete" {
				n++
			}
		}
		return n
	}
	leadOnFakeClock(t, f)
	scanUntil(t, f, t0.Add(f.c.cfg.Deadline-f.c.cfg.Interval), "stuck kept", present(f, "stuck"))
	clocktest.Step(t, f.clock, f.c.cfg.Interval, 1)
	marked := f.clock.Now()
	if claimDeletes() != 1 || f.node("stuck") == nil {
		t.Fatalf("at the deadline: %d NodeClaim deletes, node present %v; want 1, true", claimDeletes(), f.node("stuck") != nil)
	}
	scanUntil(t, f, marked.Add(f.c.cfg.StallAfter-f.c.cfg.Interval), "the stalled replacement not retried before --remediation-stall-after",
		func() bool { return f.node("stuck") != nil })
	clocktest.Step(t, f.clock, f.c.cfg.Interval, 1)
	if f.node("stuck") != nil {
		t.Errorf("the stalled replacement not retried %s after its mark", f.c.cfg.StallAfter)
	}
}
