package agent

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/gates"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// The loop driven through its phases against client-go's fake clientset
// (cluster_test.go): the start-up backoff and its exhaustion, the gates,
// and the rest of a bootstrap-only agent.

// TestStartupBackoffThenEveryPeriod: a new node whose checks fail is
// retried on the start-up backoff (1 s, 2 s, 4 s); when its tries run out
// the agent says so once (metric, Event, log), keeps the taint and retries
// every period; a round that passes then verifies it.
func TestStartupBackoffThenEveryPeriod(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil))
	check := &toggleCheck{err: errDNS}
	a, rec := startTestAgent(t, f, check, func(c *Config) { c.InitialTries = 3 })
	minPeriod := time.Duration(float64(a.cfg.Period) * (1 - a.cfg.Jitter))
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if got := a.step(t.Context()); got != want {
			t.Fatalf("wait after failed start-up round %d = %s, want %s", i+1, got, want)
		}
	}
	if got := testutil.ToFloat64(a.metrics.initialExhausted); got != 0 {
		t.Fatalf("exhausted = %v before the tries ran out", got)
	}
	for i := range 2 {
		if got := a.step(t.Context()); got < minPeriod {
			t.Fatalf("wait after failed round %d past the start-up tries = %s, want a period", 4+i, got)
		}
	}
	if got := testutil.ToFloat64(a.metrics.initialExhausted); got != 1 {
		t.Errorf("node_ready_initial_retries_exhausted_total = %v, want 1", got)
	}
	if ev := rec.got(); !slices.Equal(ev, []string{api.EventNodeVerificationFailed}) {
		t.Errorf("events = %v, want one %s", ev, api.EventNodeVerificationFailed)
	}
	if !HasTaint(f.node("n1").Spec.Taints, startup) || a.loop.failures != 5 {
		t.Fatalf("after 5 failed start-up rounds: taints %v, failures %d; want the startup taint kept, 5", f.node("n1").Spec.Taints, a.loop.failures)
	}
	check.err = nil
	if got := a.step(t.Context()); got < minPeriod {
		t.Errorf("wait after the passing round = %s, want a period", got)
	}
	if n := f.node("n1"); HasTaint(n.Spec.Taints, startup) || n.Labels["node-ready/verified"] != "true" {
		t.Errorf("after a passing round: taints %v labels %v, want verified", n.Spec.Taints, n.Labels)
	}
}

// TestStartupBackoffEndsWithTheFirstPass: once a round passed, a new node
// whose untaint failed is not paced by the start-up backoff again.
func TestStartupBackoffEndsWithTheFirstPass(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil))
	a, _ := startTestAgent(t, f, stubCheck{}, nil)
	a.next(checks.Round{Results: []checks.Result{{Name: "dns"}}})
	if !a.loop.startupOver {
		t.Fatal("a passed round left the start-up backoff running")
	}
	if d := a.next(checks.Round{Results: []checks.Result{{Name: "dns", Err: errDNS}}}); d < a.cfg.Period/2 {
		t.Errorf("wait after a later failed round = %s, want a period", d)
	}
}

// countingCheck fails its first failures runs, then passes.
type countingCheck struct {
	runs     atomic.Int32
	failures int32
}

func (*countingCheck) Name() string { return "dns" }
func (c *countingCheck) Run(context.Context) error {
	if c.runs.Add(1) <= c.failures {
		return errDNS
	}
	return nil
}

// TestRunVerifiesANewNode: Run retries a new node on the start-up backoff
// until its checks pass, untaints it, reports ready, and leaves the node as
// it is when stopped.
func TestRunVerifiesANewNode(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil))
	check := &countingCheck{failures: 2}
	a, _ := newTestAgent(t, f, []checks.Check{check}, func(c *Config) { c.InitialBackoff = 10 * time.Millisecond })
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), "no verification round") {
		t.Errorf("Ready before any round = %v, want not ready", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitFor(t, "the node verified", func() bool {
		n := f.node("n1")
		return !HasTaint(n.Spec.Taints, startup) && n.Labels["node-ready/verified"] == "true"
	})
	if got := check.runs.Load(); got != 3 {
		t.Errorf("%d rounds, want 3 (two failed, one passed)", got)
	}
	if err := a.Ready(); err != nil {
		t.Errorf("Ready after a passed round = %v", err)
	}
	patches := len(f.patches)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if len(f.patches) != patches {
		t.Errorf("the node was written on the way out: %v", f.patches[patches:])
	}
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// woken reports whether the loop was asked for a round, and takes the request.
func woken(a *Agent) bool {
	select {
	case <-a.wake:
		return true
	default:
		return false
	}
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// conditionFailing decodes the checks the agent's condition on n says fail.
func conditionFailing(t *testing.T, n *corev1.Node) []string {
	t.Helper()
	m, err := api.ParseConditionMessage(nodeCondition(n, ConditionType).Message)
	if err != nil {
		t.Fatal(err)
	}
	return m.Failing
}

// TestConditionsGateThroughTheLoop: the conditions gate, built from its
// flags' configuration, holds the startup taint and names itself on the
// node; the condition changing wakes the loop, whose next round verifies
// the node; being a bootstrap gate, it no longer runs once verified.
func TestConditionsGateThroughTheLoop(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil))
	cfg := gates.NewConditionsConfig()
	cfg.Require = []string{"Ready=True"}
	gate := cfg.Build(checks.Deps{})
	a, _ := startTestAgentWith(t, f, []checks.Check{stubCheck{}, gate}, nil)
	a.loop.startupOver = true
	a.step(t.Context())
	n := f.node("n1")
	if !HasTaint(n.Spec.Taints, startup) {
		t.Fatal("untainted while the node reports no Ready condition")
	}
	if failing := conditionFailing(t, n); !slices.Equal(failing, []string{"conditions"}) {
		t.Errorf("condition says failing %v, want the gate", failing)
	}
	woken(a)
	f.update("n1", func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
	})
	waitFor(t, "the loop woken by the condition", func() bool { return woken(a) })
	a.loop.woken = true
	a.step(t.Context())
	if n := f.node("n1"); HasTaint(n.Spec.Taints, startup) {
		t.Fatalf("still tainted after Ready=True: %v", n.Spec.Taints)
	}
	// Verified: the bootstrap gate is out of the periodic rounds.
	f.update("n1", func(n *corev1.Node) { n.Status.Conditions[len(n.Status.Conditions)-1].Status = corev1.ConditionFalse })
	waitFor(t, "the watch shows Ready=False", func() bool {
		return nodeCondition(a.view.node(), corev1.NodeReady).Status == corev1.ConditionFalse
	})
	a.loop.woken = false
	a.step(t.Context())
	if a.loop.failures != 0 || len(f.node("n1").Spec.Taints) != 0 {
		t.Errorf("a verified node failed on its bootstrap gate: %d failures, taints %v", a.loop.failures, f.node("n1").Spec.Taints)
	}
}

// TestDaemonSetGateThroughTheLoop: the DaemonSet gate, built from its
// flags' configuration, lists the DaemonSets when the loop starts it, holds
// the startup taint for a DaemonSet whose pod is not on the node, gives up
// on it after its timeout (metric, Event) so the node is verified, and its
// watches stop once the node is verified.
func TestDaemonSetGateThroughTheLoop(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil))
	f.add(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cni", UID: "ds-cni"}})
	cfg := gates.NewDaemonSetsConfig()
	cfg.Timeout = time.Second
	gate := cfg.Build(checks.Deps{
		Kube: f.Clientset, NodeName: "n1", PodName: "agent-n1", PodNamespace: "kube-node-ready",
		AgentTaints: []string{startup.Key, unhealthy.Key},
	})
	a, rec := startTestAgentWith(t, f, []checks.Check{stubCheck{}, gate}, nil)
	a.loop.startupOver = true
	a.step(t.Context())
	n := f.node("n1")
	if !HasTaint(n.Spec.Taints, startup) {
		t.Fatal("untainted while a DaemonSet has no pod on the node")
	}
	if failing := conditionFailing(t, n); !slices.Equal(failing, []string{"daemonsets"}) {
		t.Errorf("condition says failing %v, want the gate", failing)
	}
	time.Sleep(cfg.Timeout)
	a.step(t.Context())
	if n := f.node("n1"); HasTaint(n.Spec.Taints, startup) {
		t.Fatalf("still tainted after the gate's timeout: %v", n.Spec.Taints)
	}
	if got := testutil.ToFloat64(a.metrics.gateTimeouts); got != 1 {
		t.Errorf("node_ready_gate_timeouts_total = %v, want 1", got)
	}
	if ev := rec.got(); !slices.Equal(ev, []string{api.EventDaemonSetGateTimeout, api.EventNodeVerified}) {
		t.Errorf("events = %v, want [%s %s]", ev, api.EventDaemonSetGateTimeout, api.EventNodeVerified)
	}
	if f.openWatches("daemonsets") == 0 {
		t.Fatal("no DaemonSet watch ran while the node was verified")
	}
	a.step(t.Context())
	waitFor(t, "the DaemonSet watch stopped on the verified node", func() bool { return f.openWatches("daemonsets") == 0 })
}

// TestBootstrapOnlyAgentRests: with no continuous check, a verified node
// gets no more rounds: the agent says so in the condition, is ready, stops
// the checks' watches, writes nothing, and then sends no request at all; a
// startup taint something adds back wakes it, and it removes that taint
// again.
func TestBootstrapOnlyAgentRests(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
	check := &countingCheck{}
	a, _ := startTestAgent(t, f, check, func(c *Config) { c.Continuous = nil })
	stops := &countingStopper{}
	a.idleStop = stops
	if got := a.step(t.Context()); got != idleWait {
		t.Errorf("wait of a bootstrap-only agent on a verified node = %s, want %s", got, idleWait)
	}
	if check.runs.Load() != 0 || len(f.patches) != 0 {
		t.Errorf("%d rounds and %d node patches on a verified node, want none", check.runs.Load(), len(f.patches))
	}
	if c := nodeCondition(f.node("n1"), ConditionType); c.Reason != api.ReasonBootstrapped {
		t.Errorf("condition reason %q, want %s", c.Reason, api.ReasonBootstrapped)
	}
	if err := a.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
	// At rest, a step costs the API server nothing.
	f.ClearActions()
	a.step(t.Context())
	if got := f.Actions(); len(got) != 0 {
		t.Errorf("%d requests in a step at rest, want none: %v", len(got), got)
	}
	woken(a)
	f.update("n1", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{startup} })
	waitFor(t, "the idle loop woken by the startup taint", func() bool { return woken(a) })
	if got := a.step(t.Context()); got != idleWait {
		t.Errorf("wait after removing the startup taint again = %s, want %s", got, idleWait)
	}
	if n := f.node("n1"); HasTaint(n.Spec.Taints, startup) || check.runs.Load() != 0 {
		t.Errorf("taints %v after %d rounds: want the startup taint removed without a round", n.Spec.Taints, check.runs.Load())
	}
	if stops.n != 1 {
		t.Errorf("the checks' watches stopped %d times, want once, when the agent went idle", stops.n)
	}
}

// countingStopper counts its Stop calls.
type countingStopper struct{ n int }

func (s *countingStopper) Stop() { s.n++ }

// TestNodeGoneFromTheWatch: a node deleted under the agent is waited for;
// no round runs and the agent does not become ready.
func TestNodeGoneFromTheWatch(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{startup}, nil, nil))
	check := &countingCheck{}
	a, _ := startTestAgent(t, f, check, nil)
	f.remove("n1")
	waitFor(t, "the watch shows the node gone", func() bool { return a.view.node() == nil })
	if got := a.step(t.Context()); got != a.cfg.Period {
		t.Errorf("wait without a node = %s, want the period", got)
	}
	if check.runs.Load() != 0 || a.Ready() == nil {
		t.Errorf("%d rounds, Ready = %v: want none and not ready", check.runs.Load(), a.Ready())
	}
}
