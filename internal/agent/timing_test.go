package agent

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/clocktest"
)

// The loop's timing rules, proven on a fake clock: Run waits on the clock's
// timer between rounds, and the test steps the clock to the very instant a
// round is due. An hour of rounds takes milliseconds.

// clockedLoop is an agent's Run on a fake clock.
type clockedLoop struct {
	a     *Agent
	f     *cluster
	rec   *fakeRecorder
	clock *clocktesting.FakeClock
}

// runOnFakeClock starts Run on f with a fake clock and no jitter, and
// returns once the loop waits for its first round (due at once). The loop
// stops when the test ends; goleak then checks nothing it started is left.
func runOnFakeClock(t *testing.T, f *cluster, cs []checks.Check, mutate func(*Config)) *clockedLoop {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a, rec := newTestAgent(t, f, cs, func(c *Config) {
		c.Clock, c.Jitter = fc, 0
		if mutate != nil {
			mutate(c)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		goleak.VerifyNone(t, ignore)
	})
	clocktest.Await(t, fc, 1)
	return &clockedLoop{a: a, f: f, rec: rec, clock: fc}
}

// step moves the clock by d and returns once the loop waits again.
func (l *clockedLoop) step(t *testing.T, d time.Duration) {
	t.Helper()
	clocktest.Step(t, l.clock, d, 1)
}

// rounds is how many rounds the loop ran.
func (l *clockedLoop) rounds() int { return int(testutil.ToFloat64(l.a.metrics.iterations)) }

// expectRound steps the clock to one tick before d, where no round may
// run, then to d, where exactly one must.
func (l *clockedLoop) expectRound(t *testing.T, d time.Duration, what string) {
	t.Helper()
	before := l.rounds()
	l.step(t, d-time.Millisecond)
	if got := l.rounds(); got != before {
		t.Fatalf("%s: a round ran %s early (%d rounds, want %d)", what, time.Millisecond, got, before)
	}
	l.step(t, time.Millisecond)
	if got := l.rounds(); got != before+1 {
		t.Fatalf("%s: %d rounds after %s, want %d", what, got-before, d, 1)
	}
}

func (l *clockedLoop) tainted() bool { return HasTaint(l.f.node("n1").Spec.Taints, unhealthy) }

// TestRetaintThenRecoverOnTheClock: a verified node whose checks fail is
// re-tainted by its third failed round (--retaint-threshold), the rounds a
// period apart; once its checks pass, the rounds that confirm the recovery
// run --recover-interval apart and the second (--recover-threshold)
// untaints it; then the rounds are a period apart again.
func TestRetaintThenRecoverOnTheClock(t *testing.T) {
	const period, interval = time.Hour, 10 * time.Second
	fail := &atomic.Bool{}
	fail.Store(true)
	check := switchCheck{fail}
	l := runOnFakeClock(t, newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil)), []checks.Check{check}, func(c *Config) {
		c.Period, c.RecoverInterval = period, interval
		c.Thresholds = Thresholds{Retaint: 3, Recover: 2}
	})

	l.step(t, 0)
	l.expectRound(t, period, "second failed round")
	if l.tainted() {
		t.Fatal("re-tainted after 2 failed rounds, want 3")
	}
	l.expectRound(t, period, "third failed round")
	if !l.tainted() {
		t.Fatalf("not re-tainted after 3 failed rounds a period apart (failures %v)", testutil.ToFloat64(l.a.metrics.failures))
	}

	fail.Store(false)
	l.expectRound(t, period, "first passed round of the re-tainted node")
	if !l.tainted() {
		t.Fatal("untainted after 1 passed round, want 2")
	}
	l.expectRound(t, interval, "second passed round, --recover-interval later")
	if l.tainted() {
		t.Fatal("still re-tainted after 2 passed rounds")
	}
	l.expectRound(t, period, "round of the recovered node")
	if got := l.rounds(); got != 6 {
		t.Errorf("%d rounds, want 6", got)
	}
	if ev := l.rec.got(); !slices.Equal(ev, []string{api.EventNodeRetainted, api.EventNodeVerified}) {
		t.Errorf("events = %v, want [%s %s]", ev, api.EventNodeRetainted, api.EventNodeVerified)
	}
}

// TestFailedRoundsOfARetaintedNodeKeepThePeriod: only passes are hurried;
// a re-tainted node that keeps failing is checked once a period, so an
// outage costs the API server no more than before.
func TestFailedRoundsOfARetaintedNodeKeepThePeriod(t *testing.T) {
	fail := &atomic.Bool{}
	fail.Store(true)
	check := switchCheck{fail}
	l := runOnFakeClock(t, newFakeCluster(t, testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil)), []checks.Check{check}, func(c *Config) {
		c.Period, c.RecoverInterval = time.Hour, 10*time.Second
	})
	l.step(t, 0)
	for i := range 3 {
		l.expectRound(t, time.Hour, "failed round of a re-tainted node")
		if !l.tainted() {
			t.Fatalf("untainted after %d failed rounds", i+2)
		}
	}
}

// TestFreshAgentCountsPeriodicRounds: an agent that (re)starts on a node in
// service (verified, or carrying no taint or label of ours: the chart
// installed into a running cluster) while its checks fail re-taints it
// only after --retaint-threshold rounds a period apart: the start-up
// backoff, which paces only a node carrying the startup taint, never
// shortens the tolerance.
func TestFreshAgentCountsPeriodicRounds(t *testing.T) {
	for _, tt := range []struct {
		name string
		node *corev1.Node
	}{
		{"verified node", testNode("n1", nil, verifiedLabels, nil)},
		{"node without any taint or label of ours", testNode("n1", nil, nil, nil)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fail := &atomic.Bool{}
			fail.Store(true)
			l := runOnFakeClock(t, newFakeCluster(t, tt.node), []checks.Check{switchCheck{fail}}, func(c *Config) {
				c.Period, c.InitialBackoff = time.Minute, time.Second
				c.Thresholds.Retaint = 3
			})
			l.step(t, 0)
			for i := range 2 {
				l.expectRound(t, time.Minute, "failed periodic round")
				if got := l.tainted(); got != (i == 1) {
					t.Fatalf("after %d failed rounds: re-tainted %v, want %v", i+2, got, i == 1)
				}
			}
		})
	}
}

// TestStartupBackoffOnTheClock: a new node whose checks fail is retried
// 1 s, 2 s, 4 s after its failed rounds (--initial-backoff, doubling,
// --initial-tries=3); when the tries run out the agent says so once
// (NodeVerificationFailed, node_ready_initial_retries_exhausted_total) and
// keeps the startup taint, retrying every period; a round that passes then
// verifies the node.
func TestStartupBackoffOnTheClock(t *testing.T) {
	fail := &atomic.Bool{}
	fail.Store(true)
	l := runOnFakeClock(t, newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil)), []checks.Check{switchCheck{fail}}, func(c *Config) {
		c.Period, c.InitialBackoff, c.InitialTries = time.Minute, time.Second, 3
	})
	l.step(t, 0)
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		l.expectRound(t, d, "start-up retry")
	}
	if got := testutil.ToFloat64(l.a.metrics.initialExhausted); got != 1 {
		t.Errorf("node_ready_initial_retries_exhausted_total = %v, want 1", got)
	}
	l.expectRound(t, time.Minute, "round past the start-up tries")
	if ev := l.rec.got(); !slices.Equal(ev, []string{api.EventNodeVerificationFailed}) {
		t.Errorf("events = %v, want one %s", ev, api.EventNodeVerificationFailed)
	}
	if n := l.f.node("n1"); !HasTaint(n.Spec.Taints, startup) || n.Labels["node-ready/verified"] == "true" {
		t.Fatalf("after 5 failed start-up rounds: taints %v, labels %v; want the startup taint kept", n.Spec.Taints, n.Labels)
	}
	fail.Store(false)
	l.expectRound(t, time.Minute, "passing round")
	if n := l.f.node("n1"); HasTaint(n.Spec.Taints, startup) || n.Labels["node-ready/verified"] != "true" {
		t.Errorf("after a passing round: taints %v, labels %v; want verified", n.Spec.Taints, n.Labels)
	}
}

// TestWokenRoundsKeepThePeriodicScheduleOnTheClock: on a node in service,
// a failed round that a change of the node woke runs at once, counts for
// nothing and leaves the next periodic round when it was due; the node is
// re-tainted by its third periodic failed round, two periods after the
// first, however many woken rounds came between.
func TestWokenRoundsKeepThePeriodicScheduleOnTheClock(t *testing.T) {
	fail := &atomic.Bool{}
	fail.Store(true)
	l := runOnFakeClock(t, newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil)), []checks.Check{switchCheck{fail}}, func(c *Config) {
		c.Period, c.Thresholds.Retaint = time.Minute, 3
	})
	l.step(t, 0)
	wake := func() {
		t.Helper()
		before := l.rounds()
		l.a.signal()
		clocktest.Until(t, "the woken round", func() bool { return l.rounds() == before+1 })
		clocktest.Await(t, l.clock, 1)
	}
	for i := range 2 {
		l.step(t, 20*time.Second)
		wake()
		wake()
		if l.tainted() {
			t.Fatalf("re-tainted by woken rounds after %d periodic ones", i+1)
		}
		l.expectRound(t, 40*time.Second, "periodic round, as due before the woken ones")
	}
	if !l.tainted() {
		t.Errorf("not re-tainted by the third periodic failed round (%d rounds in all)", l.rounds())
	}
	if got := l.rounds(); got != 7 {
		t.Errorf("%d rounds, want 7: 3 periodic, 4 woken", got)
	}
}
