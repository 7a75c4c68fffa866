package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
)

// stubCheck passes or fails as told.
type stubCheck struct{ err error }

func (stubCheck) Name() string                { return "dns" }
func (c stubCheck) Run(context.Context) error { return c.err }

// testNode is a node as the API server returns it: each call is a new
// object with a UID of its own, as a node deleted and created again under
// the same name has.
func testNode(name string, taints []corev1.Taint, labels, annotations map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID(), Labels: labels, Annotations: annotations,
			CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Minute))},
		Spec: corev1.NodeSpec{Taints: taints},
	}
}

var (
	verifiedLabels = map[string]string{"node-ready/verified": "true"}
	retaintedLabel = map[string]string{"node-ready/verified": "false"}
	errDNS         = errors.New("dns: no answer")
)

// TestStep runs one iteration of the agent loop against client-go's fake
// clientset, as sample-controller tests its sync handler: a situation in,
// the writes and Events out.
func TestStep(t *testing.T) {
	karpenter := corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name      string
		node      *corev1.Node
		others    []*corev1.Node
		roundErr  error
		failures  int
		passes    int
		budget    string
		notReady  bool
		lease     *coordinationv1.Lease
		hooks     []func(f *cluster) error
		wantTaint []string // taint keys after the step
		wantLabel string
		wantWrite int // accepted JSON patches of the node
		wantEvent []string
		wantFail  int // consecutive failures after the step
	}{
		{name: "new node, round passes: untainted and labelled in one write",
			node:      testNode("n1", []corev1.Taint{startup}, nil, nil),
			wantLabel: "true", wantWrite: 1, wantEvent: []string{api.EventNodeVerified}},
		{name: "new node, round fails: nothing written",
			node: testNode("n1", []corev1.Taint{startup}, nil, nil), roundErr: errDNS, failures: 5,
			wantTaint: []string{startup.Key}, wantFail: 6},
		{name: "verified node, second failure: nothing written",
			node: testNode("n1", nil, verifiedLabels, nil), roundErr: errDNS, failures: 1,
			wantLabel: "true", wantFail: 2},
		{name: "verified node, third failure: unhealthy taint, label false",
			node: testNode("n1", nil, verifiedLabels, nil), roundErr: errDNS, failures: 2,
			wantTaint: []string{unhealthy.Key}, wantLabel: "false", wantWrite: 1, wantEvent: []string{api.EventNodeRetainted}, wantFail: 3},
		{name: "fleet budget used up: suppressed, not tainted",
			node:   testNode("n1", nil, verifiedLabels, nil),
			others: []*corev1.Node{testNode("n2", []corev1.Taint{unhealthy}, retaintedLabel, nil)},
			budget: "1", roundErr: errDNS, failures: 2,
			wantLabel: "true", wantEvent: []string{api.EventRetaintSuppressed}, wantFail: 3},
		{name: "re-taint Lease held by another agent: deferred with an Event, not tainted",
			node: testNode("n1", nil, verifiedLabels, nil), lease: leaseAt("gone", time.Now().Add(time.Hour), 3600),
			roundErr: errDNS, failures: 2,
			wantLabel: "true", wantEvent: []string{api.EventRetaintDeferred}, wantFail: 3},
		{name: "live node (no taint or label of ours), round passes: labelled in one write, no Event",
			node:      testNode("n1", nil, nil, nil),
			wantLabel: "true", wantWrite: 1},
		{name: "live node, third failure of the continuous checks: unhealthy taint, label false",
			node: testNode("n1", nil, nil, nil), roundErr: errDNS, failures: 2,
			wantTaint: []string{unhealthy.Key}, wantLabel: "false", wantWrite: 1, wantEvent: []string{api.EventNodeRetainted}, wantFail: 3},
		{name: "re-tainted node, first pass: kept until the recover threshold",
			node:      testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil),
			wantTaint: []string{unhealthy.Key}, wantLabel: "false"},
		{name: "re-tainted node, second pass: untainted",
			node: testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil), passes: 1,
			wantLabel: "true", wantWrite: 1, wantEvent: []string{api.EventNodeVerified}},
		{name: "bypass annotation: untainted while failing, never re-tainted",
			node:     testNode("n1", []corev1.Taint{startup}, nil, map[string]string{"node-ready/skip-verification": "true"}),
			roundErr: errDNS, failures: 9,
			wantWrite: 1, wantEvent: []string{api.EventNodeVerified}, wantFail: 9},
		{name: "bypass on a re-tainted node: untainted and verified=false removed, freeing its fleet-budget slot",
			node:     testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, map[string]string{"node-ready/skip-verification": "true"}),
			roundErr: errDNS, failures: 9,
			wantWrite: 1, wantEvent: []string{api.EventNodeVerified}, wantFail: 9},
		{name: "fleet budget: a bypassed node still labelled verified=false does not count",
			node: testNode("n1", nil, verifiedLabels, nil),
			others: []*corev1.Node{testNode("n2", []corev1.Taint{unhealthy}, retaintedLabel,
				map[string]string{"node-ready/skip-verification": "true"})},
			budget: "1", roundErr: errDNS, failures: 2,
			wantTaint: []string{unhealthy.Key}, wantLabel: "false", wantWrite: 1, wantEvent: []string{api.EventNodeRetainted}, wantFail: 3},
		{name: "wait-for taint: no round, nothing written",
			node:      testNode("n1", []corev1.Taint{startup, karpenter}, nil, nil),
			wantTaint: []string{startup.Key, karpenter.Key}},
		{name: "control-plane fault: the failed round does not count",
			node: testNode("n1", nil, verifiedLabels, nil), roundErr: errDNS, failures: 2, notReady: true,
			wantLabel: "true"},
		{name: "concurrent edit: the guarded patch fails, the node is re-read and patched",
			node: testNode("n1", []corev1.Taint{startup}, nil, nil),
			hooks: []func(f *cluster) error{func(f *cluster) error {
				n := f.stored("n1")
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoSchedule})
				f.put(n)
				return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("changed"))
			}},
			wantTaint: []string{"other"}, wantLabel: "true", wantWrite: 1, wantEvent: []string{api.EventNodeVerified}},
		{name: "write refused (admission policy): node unchanged, error",
			node: testNode("n1", []corev1.Taint{startup}, nil, nil),
			hooks: []func(f *cluster) error{func(*cluster) error {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("denied by policy"))
			}},
			wantTaint: []string{startup.Key}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t, append([]*corev1.Node{tt.node}, tt.others...)...)
			if tt.notReady {
				f.readyErr = errors.New("readyz: 500")
			}
			f.patchHooks = tt.hooks
			if tt.lease != nil {
				f.add(tt.lease)
			}
			a, rec := startTestAgent(t, f, stubCheck{err: tt.roundErr}, func(c *Config) {
				if tt.budget != "" {
					c.FleetBudget = mustBudget(t, tt.budget)
				}
			})
			a.loop.failures, a.loop.passes = tt.failures, tt.passes
			a.loop.startupOver = true
			a.step(t.Context())

			got := f.node("n1")
			var keys []string
			for _, taint := range got.Spec.Taints {
				keys = append(keys, taint.Key)
			}
			if !slices.Equal(keys, tt.wantTaint) {
				t.Errorf("taints = %v, want %v", keys, tt.wantTaint)
			}
			if l := got.Labels["node-ready/verified"]; l != tt.wantLabel {
				t.Errorf("verified label = %q, want %q", l, tt.wantLabel)
			}
			if len(f.patches) != tt.wantWrite {
				t.Errorf("%d node patches, want %d: %v", len(f.patches), tt.wantWrite, f.patches)
			}
			if ev := rec.got(); !slices.Equal(ev, tt.wantEvent) {
				t.Errorf("events = %v, want %v", ev, tt.wantEvent)
			}
			if a.loop.failures != tt.wantFail {
				t.Errorf("consecutive failures = %d, want %d", a.loop.failures, tt.wantFail)
			}
		})
	}
}

// TestStepUsesItsOwnWriteBeforeTheWatchShowsIt: a decision right after a
// write must see that write even when the watch has not delivered it.
func TestStepUsesItsOwnWriteBeforeTheWatchShowsIt(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
	check := &toggleCheck{err: errDNS}
	a, _ := startTestAgent(t, f, check, nil)
	a.loop.failures = 2
	// From here on the watch delivers nothing: the informer's copy lags.
	f.silent.Store(true)
	a.loop.startupOver = true
	a.step(t.Context())
	if !HasTaint(f.node("n1").Spec.Taints, unhealthy) {
		t.Fatal("not re-tainted")
	}
	check.err = nil
	a.loop.passes = 1
	a.step(t.Context())
	if n := f.node("n1"); HasTaint(n.Spec.Taints, unhealthy) || n.Labels["node-ready/verified"] != "true" {
		t.Errorf("after passing rounds the node is %v %v: the decision used the stale cached node", n.Spec.Taints, n.Labels)
	}
}

type toggleCheck struct{ err error }

func (*toggleCheck) Name() string                { return "dns" }
func (c *toggleCheck) Run(context.Context) error { return c.err }

// testConfig is the agent's default configuration for node n1.
func testConfig() Config {
	fleet, _ := budget.Parse("10%")
	return Config{
		NodeName: "n1", LeaseNamespace: "kube-node-ready",
		Taints:        Taints{Startup: startup, Unhealthy: unhealthy},
		VerifiedLabel: "node-ready/verified", BypassAnnotation: "node-ready/skip-verification",
		WaitForTaints: []string{"karpenter.sh/unregistered"},
		Continuous:    []string{"dns"},
		CheckTimeout:  time.Second, Period: time.Minute, Jitter: 0.1,
		InitialBackoff: time.Second, InitialTries: 5,
		Thresholds:  Thresholds{Retaint: 3, Recover: 2},
		FleetBudget: fleet, FleetBudgetFlag: "--fleet-budget=10%",
	}
}

// startTestAgent builds an agent for node n1 on f with one check and runs
// its node informer until the test ends.
func startTestAgent(t *testing.T, f *cluster, check checks.Check, mutate func(*Config)) (*Agent, *fakeRecorder) {
	t.Helper()
	return startTestAgentWith(t, f, []checks.Check{check}, mutate)
}

// startTestAgentWith is startTestAgent with any checks (gates among them).
func startTestAgentWith(t *testing.T, f *cluster, cs []checks.Check, mutate func(*Config)) (*Agent, *fakeRecorder) {
	t.Helper()
	a, rec := newTestAgent(t, f, cs, mutate)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go a.view.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), a.view.informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return a, rec
}

// newTestAgent builds an agent for node n1 on f; its node informer does not run yet.
func newTestAgent(t *testing.T, f *cluster, cs []checks.Check, mutate func(*Config)) (*Agent, *fakeRecorder) {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	reg := prometheus.NewRegistry()
	rec := &fakeRecorder{}
	checkMetrics, err := checks.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	agentMetrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, f.client(), cs, nil, checkMetrics, agentMetrics, rec, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a, rec
}

// TestRetaintGatesOnTheNodeItWrites: the bypass annotation set while the
// round runs, or between the agent's read and its patch, stops the re-taint:
// the gates are checked on the very version of the node the patch applies
// to.
func TestRetaintGatesOnTheNodeItWrites(t *testing.T) {
	bypass := func(f *cluster) {
		n := f.stored("n1")
		n.Annotations = map[string]string{"node-ready/skip-verification": "true"}
		f.put(n)
	}
	t.Run("bypass set during the round", func(t *testing.T) {
		f := newFakeCluster(t, testNode("n1", []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}}, verifiedLabels, nil))
		check := &hookCheck{err: errDNS, hook: func() {
			f.mu.Lock()
			bypass(f)
			f.mu.Unlock()
		}}
		a, _ := startTestAgent(t, f, check, nil)
		a.loop.failures = 2
		a.loop.startupOver = true
		a.step(t.Context())
		if n := f.node("n1"); HasTaint(n.Spec.Taints, unhealthy) {
			t.Errorf("re-tainted a node bypassed while its round ran: %v", n.Spec.Taints)
		}
	})
	t.Run("bypass set between the read and the patch", func(t *testing.T) {
		f := newFakeCluster(t, testNode("n1", []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}}, verifiedLabels, nil))
		f.patchHooks = []func(f *cluster) error{func(f *cluster) error {
			bypass(f)
			return nil // the patch then applies to the bypassed node, unless it is guarded
		}}
		a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, nil)
		a.loop.failures = 2
		a.loop.startupOver = true
		a.step(t.Context())
		if n := f.node("n1"); HasTaint(n.Spec.Taints, unhealthy) {
			t.Errorf("re-tainted a node bypassed after the agent read it: %v", n.Spec.Taints)
		}
	})
}

func mustBudget(t *testing.T, s string) budget.Budget {
	t.Helper()
	b, err := budget.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hookCheck fails as told and runs hook while it runs.
type hookCheck struct {
	err  error
	hook func()
}

func (*hookCheck) Name() string { return "dns" }
func (c *hookCheck) Run(context.Context) error {
	c.hook()
	time.Sleep(100 * time.Millisecond) // the watch delivers the change
	return c.err
}
