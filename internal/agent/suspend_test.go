package agent

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// fakeSwitch is the suspend switch: cached as the watch saw it, fresh as a
// read right now finds it.
type fakeSwitch struct {
	cached, fresh suspend.State
	reads         int
}

func (s *fakeSwitch) State() suspend.State { return s.cached }
func (s *fakeSwitch) Read(context.Context) (suspend.State, error) {
	s.reads++
	return s.fresh, s.fresh.Err
}

var (
	switchOff = suspend.State{Known: true}
	switchOn  = suspend.State{Known: true, On: true, Reason: "dns incident", By: "oncall", Since: "2026-01-01T00:00:00Z"}
	switchErr = suspend.State{Err: errors.New("configmaps is forbidden")}
)

// TestSuspendHoldsEveryRetaint: a node whose checks call for a re-taint
// is not re-tainted while the operator's switch is on, whether the watch
// shows it or only a fresh read right before the taint does, nor while
// the switch cannot be read; the held re-taint is counted every round and
// told once per episode. With the switch off, the same node is re-tainted.
func TestSuspendHoldsEveryRetaint(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cached, fresh suspend.State
		want          string // the deferral reason; "" re-taints
		noLease       bool   // held before the Lease is taken
	}{
		{name: "switch on, seen by the watch", cached: switchOn, fresh: switchOn, want: DeferSuspended, noLease: true},
		{name: "switch on, seen only on the fresh read", cached: switchOff, fresh: switchOn, want: DeferSuspended},
		{name: "switch unreadable by the watch", cached: switchErr, fresh: switchOff, want: DeferSuspendUnreadable, noLease: true},
		{name: "switch not read yet", cached: suspend.State{}, fresh: switchOff, want: DeferSuspendUnreadable, noLease: true},
		{name: "fresh read fails", cached: switchOff, fresh: switchErr, want: DeferSuspendUnreadable},
		{name: "switch off", cached: switchOff, fresh: switchOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
			sw := &fakeSwitch{cached: tc.cached, fresh: tc.fresh}
			a, rec := startTestAgent(t, f, stubCheck{err: errDNS}, func(c *Config) { c.Suspend = sw })
			a.loop.failures = a.cfg.Thresholds.Retaint - 1
			a.loop.startupOver = true
			a.step(t.Context())
			a.step(t.Context())
			tainted := HasTaint(f.node("n1").Spec.Taints, unhealthy)
			if tc.want == "" {
				if !tainted {
					t.Fatal("not re-tainted with the switch off")
				}
				return
			}
			if tainted {
				t.Fatalf("re-tainted while %s", tc.name)
			}
			if got := testutil.ToFloat64(a.metrics.retaintDeferred.WithLabelValues(tc.want)); got != 2 {
				t.Errorf("node_ready_retaint_deferred_total{reason=%q} = %v after two rounds, want 2", tc.want, got)
			}
			if n := countOf(rec.got(), api.EventRetaintSuspended); n != 1 {
				t.Errorf("%d %s Events in two rounds, want 1 (once per episode): %v", n, api.EventRetaintSuspended, rec.got())
			}
			if tc.noLease && (f.requests("leases") != 0 || sw.reads != 0) {
				t.Errorf("%d requests of the Lease and %d reads of the switch while the watch showed it holding, want none", f.requests("leases"), sw.reads)
			}
		})
	}
}

// TestSuspendLetsUntaintsGoOn: a re-tainted node whose checks pass again is
// untainted while the switch is on: that is the safe direction.
func TestSuspendLetsUntaintsGoOn(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil))
	a, _ := startTestAgent(t, f, stubCheck{}, func(c *Config) { c.Suspend = &fakeSwitch{cached: switchOn, fresh: switchOn} })
	a.loop.startupOver = true
	a.loop.passes = a.cfg.Thresholds.Recover - 1
	a.step(t.Context())
	if n := f.node("n1"); HasTaint(n.Spec.Taints, unhealthy) {
		t.Fatalf("still re-tainted after passing rounds while suspended: %v", n.Spec.Taints)
	}
}

func countOf(reasons []string, reason string) int {
	return len(slices.DeleteFunc(slices.Clone(reasons), func(r string) bool { return r != reason }))
}
