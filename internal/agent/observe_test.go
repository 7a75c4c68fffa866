package agent

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// switchCheck fails while fail is set.
type switchCheck struct{ fail *atomic.Bool }

func (switchCheck) Name() string { return "dns" }
func (c switchCheck) Run(context.Context) error {
	if c.fail.Load() {
		return errDNS
	}
	return nil
}

// Observe mode runs the same decisions as enforce and writes none of their
// taints: a new node is never held, a failing node never re-tainted, and
// what enforce would have done is in the condition, the Events and the
// metrics; only the verified label "true" is written.
func TestObserveRecordsWhatEnforceWouldDo(t *testing.T) {
	observe := func(c *Config) { c.Observe = true }
	cond := func(f *cluster) *corev1.NodeCondition {
		for _, c := range f.node("n1").Status.Conditions {
			if c.Type == ConditionType {
				return &c
			}
		}
		return nil
	}
	for _, tt := range []struct {
		name string
		node *corev1.Node
	}{
		{"marked by the webhook in observe mode", testNode("n1", nil, nil,
			map[string]string{api.StartupTaintAdmissionAnnotation: api.StartupTaintObserved})},
		{"registered with our startup taint (a kubelet flag)", testNode("n1", []corev1.Taint{startup}, nil, nil)},
	} {
		t.Run("new node "+tt.name, func(t *testing.T) {
			f := newFakeCluster(t, tt.node)
			var fail atomic.Bool
			fail.Store(true)
			a, rec := startTestAgent(t, f, switchCheck{&fail}, observe)
			a.step(t.Context())
			a.step(t.Context())
			if n := f.node("n1"); len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "" {
				t.Fatalf("failing new node: taints %v, labels %v; want none: observe holds no node", n.Spec.Taints, n.Labels)
			}
			if c := cond(f); c == nil || c.Reason != api.ReasonWouldHold || c.Status != corev1.ConditionFalse {
				t.Fatalf("condition %+v, want %s", c, api.ReasonWouldHold)
			}
			if got := testutil.ToFloat64(a.metrics.observe.tainted); got != 1 {
				t.Errorf("node_ready_would_be_tainted = %v while held, want 1", got)
			}
			fail.Store(false)
			a.step(t.Context())
			if n := f.node("n1"); len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" {
				t.Fatalf("passing new node: taints %v, labels %v; want no taint and verified=true", n.Spec.Taints, n.Labels)
			}
			if c := cond(f); c == nil || c.Reason != api.ReasonChecksPassed {
				t.Errorf("condition %+v after the pass, want %s", c, api.ReasonChecksPassed)
			}
			if !slices.Contains(rec.got(), api.EventNodeWouldBeUntainted) {
				t.Errorf("events %v, want %s saying how long enforce would have held the node", rec.got(), api.EventNodeWouldBeUntainted)
			}
			if got := testutil.ToFloat64(a.metrics.observe.actions.WithLabelValues("hold")); got != 1 {
				t.Errorf("would-hold operations = %v, want 1", got)
			}
			if got := testutil.ToFloat64(a.metrics.observe.tainted); got != 0 {
				t.Errorf("node_ready_would_be_tainted = %v after the pass, want 0", got)
			}
		})
	}

	t.Run("verified node failing past the threshold", func(t *testing.T) {
		f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
		var fail atomic.Bool
		fail.Store(true)
		a, rec := startTestAgent(t, f, switchCheck{&fail}, observe)
		a.loop.startupOver = true
		for range a.cfg.Thresholds.Retaint + 2 {
			a.step(t.Context())
		}
		if n := f.node("n1"); len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" {
			t.Fatalf("taints %v, labels %v; want no taint and the label left at true", n.Spec.Taints, n.Labels)
		}
		if c := cond(f); c == nil || c.Reason != api.ReasonWouldRetaint {
			t.Fatalf("condition %+v, want %s", c, api.ReasonWouldRetaint)
		}
		if got := rec.got(); !slices.Equal(got, []string{api.EventNodeWouldBeRetainted}) {
			t.Errorf("events %v, want one %s", got, api.EventNodeWouldBeRetainted)
		}
		if got := testutil.ToFloat64(a.metrics.observe.actions.WithLabelValues("add")); got != 1 {
			t.Errorf("would-re-taint operations = %v, want 1", got)
		}
		if f.lease() != nil {
			t.Error("the re-taint Lease was taken: observe never re-taints, so it needs no budget")
		}
		fail.Store(false)
		for range a.cfg.Thresholds.Recover {
			a.step(t.Context())
		}
		if c := cond(f); c == nil || c.Reason != api.ReasonChecksPassed {
			t.Errorf("condition %+v after %d passes, want %s", c, a.cfg.Thresholds.Recover, api.ReasonChecksPassed)
		}
		if got := testutil.ToFloat64(a.metrics.observe.actions.WithLabelValues("remove")); got != 1 {
			t.Errorf("would-untaint operations = %v, want 1", got)
		}
		if got := testutil.ToFloat64(a.metrics.taintOps.WithLabelValues("add", "success")); got != 0 {
			t.Errorf("%v re-taints written in observe mode", got)
		}
	})

	t.Run("a re-tainted node when observe is switched on", func(t *testing.T) {
		f := newFakeCluster(t, testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil))
		a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, observe)
		a.loop.startupOver = true
		a.step(t.Context())
		if n := f.node("n1"); len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "" {
			t.Fatalf("taints %v, labels %v; want the taint and verified=false gone: observe keeps no taint and holds no budget slot", n.Spec.Taints, n.Labels)
		}
		if c := cond(f); c == nil || c.Reason != api.ReasonWouldRetaint {
			t.Errorf("condition %+v, want %s: enforce would keep it re-tainted", c, api.ReasonWouldRetaint)
		}
	})
}

// TestObserveRecordsARebootHold: with --reverify-after-reboot, a verified
// node that rebooted is one enforce would hold; observe records that hold
// (condition, Event, the "hold" operation), runs the bootstrap set while
// its checks fail, never taints, and records the release and the new boot
// ID with the round that passes.
func TestObserveRecordsARebootHold(t *testing.T) {
	f := newFakeCluster(t, bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil))
	check := &toggleCheck{err: errDNS}
	a, rec := startTestAgent(t, f, check, func(c *Config) { c.Observe, c.ReverifyAfterReboot = true, true })
	for range a.cfg.Thresholds.Retaint + 1 {
		a.step(t.Context())
	}
	n := f.node("n1")
	if len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" {
		t.Fatalf("rebooted node in observe mode: taints %v, labels %v; want no taint and the label left at true", n.Spec.Taints, n.Labels)
	}
	c, m := conditionOf(t, n)
	if c.Status != corev1.ConditionFalse || c.Reason != api.ReasonWouldHoldAfterReboot || !slices.Equal(m.Failing, []string{"dns"}) || m.Boot != bootA {
		t.Fatalf("condition %s %s %q: want %s naming the failing check, the boot verified under still %s", c.Status, c.Reason, c.Message, api.ReasonWouldHoldAfterReboot, bootA)
	}
	if !a.bootstrapRound(n) {
		t.Error("a node enforce would hold after a reboot does not run the bootstrap set")
	}
	if got := rec.got(); !slices.Equal(got, []string{api.EventNodeWouldBeHeldAfterReboot}) {
		t.Errorf("events %v, want one %s and no would-be re-taint", got, api.EventNodeWouldBeHeldAfterReboot)
	}
	if got := testutil.ToFloat64(a.metrics.observe.actions.WithLabelValues("hold")); got != 1 {
		t.Errorf("would-hold operations = %v, want 1", got)
	}
	if got := testutil.ToFloat64(a.metrics.observe.tainted); got != 1 {
		t.Errorf("node_ready_would_be_tainted = %v while it would be held, want 1", got)
	}
	check.err = nil
	a.step(t.Context())
	n = f.node("n1")
	if c, m := conditionOf(t, n); c.Reason != api.ReasonChecksPassed || m.Boot != bootB {
		t.Fatalf("condition %s %q after the pass: want %s with the new boot %s recorded", c.Reason, c.Message, api.ReasonChecksPassed, bootB)
	}
	if got := testutil.ToFloat64(a.metrics.observe.actions.WithLabelValues("remove")); got != 1 {
		t.Errorf("would-untaint operations = %v, want 1", got)
	}
	if got := rec.got(); !slices.Equal(got, []string{api.EventNodeWouldBeHeldAfterReboot, api.EventNodeWouldBeUntainted}) {
		t.Errorf("events %v", got)
	}
	// Verified under the new boot: no second hold.
	a.step(t.Context())
	if got := testutil.ToFloat64(a.metrics.observe.actions.WithLabelValues("hold")); got != 1 {
		t.Errorf("would-hold operations = %v after the release, want still 1", got)
	}
	if len(f.node("n1").Spec.Taints) != 0 || testutil.ToFloat64(a.metrics.taintOps.WithLabelValues("add", "success")) != 0 {
		t.Error("a taint was written in observe mode")
	}
}
