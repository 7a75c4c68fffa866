package agent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestRestartKeepsTheTolerance: a freshly started agent (its start-up
// backoff untouched) whose first round fails waits the start-up backoff only
// while its node carries the startup taint. A verified node, a re-tainted one
// and one that carries no taint of ours (the chart installed into a running
// cluster) are judged on periodic rounds: a restart never shortens the
// time to a re-taint.
func TestRestartKeepsTheTolerance(t *testing.T) {
	tests := []struct {
		name        string
		node        *corev1.Node
		wantBackoff bool
	}{
		{name: "new node with the startup taint: start-up backoff",
			node: testNode("n1", []corev1.Taint{startup}, nil, nil), wantBackoff: true},
		{name: "verified node: period",
			node: testNode("n1", nil, verifiedLabels, nil)},
		{name: "node without any taint or label of ours: period",
			node: testNode("n1", nil, nil, nil)},
		{name: "re-tainted node: period",
			node: testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t, tt.node)
			a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, func(o *Config) {
				o.Period = time.Minute
				o.InitialBackoff = time.Second
				o.Thresholds.Retaint = 3
			})
			// A fresh agent: its start-up backoff has not been used.
			var waits []time.Duration
			for range a.cfg.Thresholds.Retaint - 1 {
				waits = append(waits, a.step(t.Context()))
			}
			minPeriod := time.Duration(float64(a.cfg.Period) * (1 - a.cfg.Jitter))
			for i, d := range waits {
				if tt.wantBackoff && d >= minPeriod {
					t.Errorf("wait after failed round %d = %s, want the start-up backoff", i+1, d)
				}
				if !tt.wantBackoff && d < minPeriod {
					t.Errorf("wait after failed round %d = %s, want a period (at least %s): a restart must not shorten the tolerance", i+1, d, minPeriod)
				}
			}
			if n := f.node("n1"); tt.node.Labels["node-ready/verified"] == "true" && HasTaint(n.Spec.Taints, unhealthy) {
				t.Errorf("re-tainted after %d rounds", a.cfg.Thresholds.Retaint-1)
			}
		})
	}
}

// TestWokenRoundKeepsThePeriodicSchedule: on a node in service, a failed
// round a change of the node woke adds nothing to the failure streak and
// leaves the next periodic round when it was due; the periodic rounds then
// count as before.
func TestWokenRoundKeepsThePeriodicSchedule(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
	a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, func(o *Config) {
		o.Period = time.Minute
		o.Thresholds.Retaint = 3
	})
	a.loop.startupOver = true
	a.loop.failures, a.loop.passes = 1, 1
	a.loop.due = time.Now().Add(50 * time.Second)
	a.loop.woken = true
	for range 5 {
		if d := a.step(t.Context()); d > 50*time.Second || d < 45*time.Second {
			t.Fatalf("wait after a woken round = %s, want what was left of the periodic wait (50s)", d)
		}
	}
	if a.loop.failures != 1 || a.loop.passes != 0 {
		t.Errorf("after 5 failed woken rounds: %d failures, %d passes; want 1, 0", a.loop.failures, a.loop.passes)
	}
	if HasTaint(f.node("n1").Spec.Taints, unhealthy) {
		t.Fatal("re-tainted by woken rounds")
	}
	a.loop.woken = false
	for range 2 {
		a.step(t.Context())
	}
	if !HasTaint(f.node("n1").Spec.Taints, unhealthy) {
		t.Errorf("not re-tainted after 3 failed periodic rounds (failures = %d)", a.loop.failures)
	}
}

// TestRecoveryConfirmedAtTheRecoverInterval: a re-tainted node whose checks
// pass again waits --recover-interval, not a period, for the rounds that
// confirm it, and is untainted after --recover-threshold passes; then the
// period again. Failed rounds of a re-tainted node keep the period, and a
// verified node's passes are not hurried. 0 waits the period.
func TestRecoveryConfirmedAtTheRecoverInterval(t *testing.T) {
	const period, interval = time.Minute, 10 * time.Second
	minPeriod := func(a *Agent) time.Duration { return time.Duration(float64(a.cfg.Period) * (1 - a.cfg.Jitter)) }
	start := func(t *testing.T, node *corev1.Node, check stubCheck, recoverInterval time.Duration) (*Agent, *cluster) {
		f := newFakeCluster(t, node)
		a, _ := startTestAgent(t, f, check, func(o *Config) {
			o.Period = period
			o.Thresholds.Recover = 3
			o.RecoverInterval = recoverInterval
		})
		a.loop.startupOver = true
		return a, f
	}

	t.Run("re-tainted node passing: interval until untainted, then the period", func(t *testing.T) {
		a, f := start(t, testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil), stubCheck{}, interval)
		for i := range 2 {
			if d := a.step(t.Context()); d != interval {
				t.Fatalf("wait after passed round %d of a re-tainted node = %s, want --recover-interval %s", i+1, d, interval)
			}
			if !HasTaint(f.node("n1").Spec.Taints, unhealthy) {
				t.Fatalf("untainted after %d passed rounds, want 3", i+1)
			}
		}
		if d := a.step(t.Context()); d < minPeriod(a) {
			t.Errorf("wait after the untaint = %s, want a period", d)
		}
		if HasTaint(f.node("n1").Spec.Taints, unhealthy) {
			t.Fatal("still re-tainted after 3 passed rounds")
		}
		if d := a.step(t.Context()); d < minPeriod(a) {
			t.Errorf("wait after a passed round of the recovered node = %s, want a period", d)
		}
	})
	t.Run("re-tainted node failing: period", func(t *testing.T) {
		a, _ := start(t, testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil), stubCheck{err: errDNS}, interval)
		if d := a.step(t.Context()); d < minPeriod(a) {
			t.Errorf("wait after a failed round of a re-tainted node = %s, want a period", d)
		}
	})
	t.Run("verified node passing: period", func(t *testing.T) {
		a, _ := start(t, testNode("n1", nil, verifiedLabels, nil), stubCheck{}, interval)
		if d := a.step(t.Context()); d < minPeriod(a) {
			t.Errorf("wait after a passed round of a verified node = %s, want a period", d)
		}
	})
	t.Run("interval 0: period", func(t *testing.T) {
		a, _ := start(t, testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil), stubCheck{}, 0)
		if d := a.step(t.Context()); d < minPeriod(a) {
			t.Errorf("wait after a passed round with --recover-interval=0 = %s, want a period", d)
		}
	})
}
