package agent

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/gates"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Only continuous checks can lead to a re-taint: the bootstrap checks and
// gates hold the startup taint and nothing else, and a live node without
// our label (the chart installed into a running cluster, a renamed label,
// the bypass annotation removed) is judged by the continuous checks only.

// runsCheck is a check of a given name that fails with err (read at each
// run) and counts its runs; hook, when set, runs first.
type runsCheck struct {
	name string
	err  atomic.Pointer[error]
	runs atomic.Int32
	hook func()
}

func newRunsCheck(name string, err error) *runsCheck {
	c := &runsCheck{name: name}
	c.set(err)
	return c
}

func (c *runsCheck) set(err error) { c.err.Store(&err) }
func (c *runsCheck) Name() string  { return c.name }
func (c *runsCheck) Run(context.Context) error {
	c.runs.Add(1)
	if c.hook != nil {
		c.hook()
	}
	return *c.err.Load()
}

// readyGate is the conditions gate waiting for Ready=True: it fails on the
// test nodes, which report no condition.
func readyGate() checks.Check {
	cfg := gates.NewConditionsConfig()
	cfg.Require = []string{"Ready=True"}
	return cfg.Build(checks.Deps{})
}

// TestLiveNodeJudgedByContinuousChecksOnly: a node with neither the startup
// taint nor our label, whose bootstrap check or gate would fail, is judged
// by its continuous check alone: labelled verified=true in one write after
// its first passing round, never re-tainted however many rounds run, and
// the bootstrap check never runs on it.
func TestLiveNodeJudgedByContinuousChecksOnly(t *testing.T) {
	for _, tt := range []struct {
		name    string
		failing checks.Check
	}{
		{"a bootstrap check fails", newRunsCheck("network", errDNS)},
		{"a gate fails", readyGate()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t, testNode("n1", nil, nil, nil))
			dns := newRunsCheck("dns", nil) // continuous in testConfig
			a, rec := startTestAgentWith(t, f, []checks.Check{dns, tt.failing}, nil)
			rounds := a.cfg.Thresholds.Retaint + 2
			for range rounds {
				a.step(t.Context())
			}
			n := f.node("n1")
			if len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" {
				t.Errorf("after %d rounds: taints %v, labels %v; want no taint, verified=true", rounds, n.Spec.Taints, n.Labels)
			}
			if len(f.patches) != 1 {
				t.Errorf("%d node patches, want 1 (the label): %v", len(f.patches), f.patches)
			}
			if got := dns.runs.Load(); got != int32(rounds) {
				t.Errorf("continuous check ran %d times in %d rounds", got, rounds)
			}
			if c, ok := tt.failing.(*runsCheck); ok && c.runs.Load() != 0 {
				t.Errorf("bootstrap check ran %d times on a live node, want 0", c.runs.Load())
			}
			if a.loop.failures != 0 {
				t.Errorf("%d failed rounds counted, want 0", a.loop.failures)
			}
			if c := nodeCondition(n, ConditionType); c.Reason != api.ReasonChecksPassed {
				t.Errorf("condition %s: %s, want %s", c.Reason, c.Message, api.ReasonChecksPassed)
			}
			if got := testutil.ToFloat64(a.metrics.taintOps.WithLabelValues("add", "success")); got != 0 {
				t.Errorf("%v re-taints", got)
			}
			if ev := rec.got(); len(ev) != 0 {
				t.Errorf("events %v, want none", ev)
			}
		})
	}
}

// TestBootstrapOnlyAgentLabelsALiveNode: with no continuous check, a live
// node without our label has passed all there is: it is labelled without a
// round, the agent rests, and a failing bootstrap check can do nothing.
func TestBootstrapOnlyAgentLabelsALiveNode(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", nil, nil, nil))
	check := newRunsCheck("dns", errDNS)
	a, _ := startTestAgent(t, f, check, func(c *Config) { c.Continuous = nil })
	for i := range a.cfg.Thresholds.Retaint + 1 {
		if got := a.step(t.Context()); got != idleWait {
			t.Fatalf("wait after step %d = %s, want %s", i+1, got, idleWait)
		}
	}
	n := f.node("n1")
	if len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" {
		t.Errorf("taints %v, labels %v; want no taint, verified=true", n.Spec.Taints, n.Labels)
	}
	if check.runs.Load() != 0 || len(f.patches) != 1 {
		t.Errorf("%d rounds and %d node patches, want none and 1 (the label)", check.runs.Load(), len(f.patches))
	}
}

// TestBootstrapFailuresNeverCountTowardARetaint: a node being verified
// fails its bootstrap set for many rounds; the startup taint is then
// removed by hand. Its next rounds run the continuous checks, and only
// their failures count: the re-taint comes after --retaint-threshold of
// them, not at the first.
func TestBootstrapFailuresNeverCountTowardARetaint(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil))
	dns := newRunsCheck("dns", errDNS)
	a, _ := startTestAgentWith(t, f, []checks.Check{dns, newRunsCheck("network", errDNS)}, nil)
	a.loop.startupOver = true
	for range 5 {
		a.step(t.Context())
	}
	if n := f.node("n1"); !HasTaint(n.Spec.Taints, startup) || HasTaint(n.Spec.Taints, unhealthy) || a.loop.failures != 5 {
		t.Fatalf("after 5 failed start-up rounds: taints %v, %d failures; want the startup taint, 5", n.Spec.Taints, a.loop.failures)
	}
	f.update("n1", func(n *corev1.Node) { n.Spec.Taints = nil })
	waitFor(t, "the watch shows the startup taint gone", func() bool { return len(a.view.node().Spec.Taints) == 0 })
	for i := range a.cfg.Thresholds.Retaint - 1 {
		a.step(t.Context())
		if n := f.node("n1"); HasTaint(n.Spec.Taints, unhealthy) {
			t.Fatalf("re-tainted after %d failed rounds of the continuous checks: the bootstrap set's failures counted", i+1)
		}
	}
	a.step(t.Context())
	if n := f.node("n1"); !HasTaint(n.Spec.Taints, unhealthy) || n.Labels["node-ready/verified"] != "false" {
		t.Errorf("after %d failed rounds of the continuous checks: taints %v, labels %v; want re-tainted",
			a.cfg.Thresholds.Retaint, n.Spec.Taints, n.Labels)
	}
}

// TestBootstrapRoundNeverRetaints: the startup taint removed while a round
// of the bootstrap set runs, the round that makes the failure streak as
// long as --retaint-threshold: the decision sees a node that is not being
// verified, but the round's failures are the bootstrap set's, so nothing is
// written. The next round runs the continuous checks; it passes and labels
// the node.
func TestBootstrapRoundNeverRetaints(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil))
	const threshold = 3
	gate := newRunsCheck("network", errDNS)
	gate.hook = func() {
		if gate.runs.Load() == threshold {
			f.update("n1", func(n *corev1.Node) { n.Spec.Taints = nil })
			time.Sleep(100 * time.Millisecond) // the watch delivers the change
		}
	}
	a, _ := startTestAgentWith(t, f, []checks.Check{newRunsCheck("dns", nil), gate}, func(c *Config) { c.Thresholds.Retaint = threshold })
	a.loop.startupOver = true
	for range threshold {
		a.step(t.Context())
	}
	if n := f.node("n1"); len(n.Spec.Taints) != 0 || len(f.patches) != 0 {
		t.Fatalf("failed rounds of the bootstrap set wrote the node: taints %v, patches %v", n.Spec.Taints, f.patches)
	}
	a.step(t.Context())
	if n := f.node("n1"); len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" || gate.runs.Load() != threshold {
		t.Errorf("after a round of the continuous checks: taints %v, labels %v, bootstrap check run %d times; want labelled, %d",
			n.Spec.Taints, n.Labels, gate.runs.Load(), threshold)
	}
}

// TestLiveNodeLabelNotWrittenOverAStartupTaint: the label a live node earns
// on its continuous checks is written only to the version of the node it
// was decided on. A node that gained the startup taint before the write
// (deleted and created again under the same name) is not marked verified:
// its next round runs the bootstrap set.
func TestLiveNodeLabelNotWrittenOverAStartupTaint(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", nil, nil, nil))
	f.patchHooks = []func(f *cluster) error{func(f *cluster) error {
		n := f.stored("n1")
		n.Spec.Taints = []corev1.Taint{startup}
		f.put(n)
		return nil // the patch then applies to the changed node, unless it is guarded
	}}
	bootstrap := newRunsCheck("network", nil)
	a, _ := startTestAgentWith(t, f, []checks.Check{newRunsCheck("dns", nil), bootstrap}, nil)
	a.step(t.Context())
	if n := f.node("n1"); !HasTaint(n.Spec.Taints, startup) || n.Labels["node-ready/verified"] != "" {
		t.Fatalf("taints %v, labels %v: a node that gained the startup taint was labelled on its continuous checks alone", n.Spec.Taints, n.Labels)
	}
	a.step(t.Context())
	if n := f.node("n1"); HasTaint(n.Spec.Taints, startup) || n.Labels["node-ready/verified"] != "true" || bootstrap.runs.Load() != 1 {
		t.Errorf("taints %v, labels %v, bootstrap check run %d times: want verified by a round of the bootstrap set",
			n.Spec.Taints, n.Labels, bootstrap.runs.Load())
	}
}
