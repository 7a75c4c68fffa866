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
	cond := func(f *fakeCluster) *corev1.NodeCondition {
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
			f := newFakeCluster(tt.node)
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
			if !slices.Contains(rec.got(), ReasonWouldUntaint) {
				t.Errorf("events %v, want %s saying how long enforce would have held the node", rec.got(), ReasonWouldUntaint)
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
		f := newFakeCluster(testNode("n1", nil, verifiedLabels, nil))
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
		if got := rec.got(); !slices.Equal(got, []string{ReasonWouldRetaint}) {
			t.Errorf("events %v, want one %s", got, ReasonWouldRetaint)
		}
		if got := testutil.ToFloat64(a.metrics.observe.actions.WithLabelValues("add")); got != 1 {
			t.Errorf("would-re-taint operations = %v, want 1", got)
		}
		if f.lease != nil {
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
		f := newFakeCluster(testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil))
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
