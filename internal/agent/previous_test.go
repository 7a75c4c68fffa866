package agent

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// The taints of the cluster-autoscaler preset, with the seed keys and the
// karpenter preset's startup key as previous keys: a node created or
// re-tainted before the keys changed.
var (
	caStartup = corev1.Taint{Key: "startup-taint.cluster-autoscaler.kubernetes.io/node-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	caStatus  = corev1.Taint{Key: "status-taint.cluster-autoscaler.kubernetes.io/node-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	withPrev  = Taints{Startup: caStartup, Unhealthy: caStatus,
		PreviousStartup: []string{startup.Key, "readiness.k8s.io/node-ready"}, PreviousUnhealthy: []string{unhealthy.Key}}
	prevKeys = []string{startup.Key, "readiness.k8s.io/node-ready", unhealthy.Key}
)

func TestNodeStatePreviousKeys(t *testing.T) {
	verified := map[string]string{"node-ready/verified": "true"}
	retainted := map[string]string{"node-ready/verified": "false"}
	tests := []struct {
		name                     string
		node                     *corev1.Node
		wantStartup, wantRetaint bool
	}{
		{name: "created with the seed key only: being verified", node: node([]corev1.Taint{startup}, nil), wantStartup: true},
		{name: "previous startup key with another effect", node: node([]corev1.Taint{{Key: startup.Key, Effect: corev1.TaintEffectNoExecute}}, nil), wantStartup: true},
		{name: "previous and current startup keys", node: node([]corev1.Taint{startup, caStartup}, nil), wantStartup: true},
		{name: "re-tainted with the seed unhealthy key", node: node([]corev1.Taint{unhealthy}, retainted), wantRetaint: true},
		{name: "seed unhealthy key without the label", node: node([]corev1.Taint{unhealthy}, nil), wantRetaint: true},
		{name: "seed unhealthy key on a node labelled verified", node: node([]corev1.Taint{unhealthy}, verified), wantRetaint: true},
		{name: "a taint of someone else's is not ours", node: node([]corev1.Taint{{Key: "node-ready/other", Effect: corev1.TaintEffectNoSchedule}}, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, r := NodeState(tt.node, withPrev, "node-ready/verified")
			if s != tt.wantStartup || r != tt.wantRetaint {
				t.Errorf("NodeState = startup %v, retainted %v; want %v, %v", s, r, tt.wantStartup, tt.wantRetaint)
			}
		})
	}
}

func TestDecidePreviousKeys(t *testing.T) {
	current := []corev1.Taint{caStartup, caStatus}
	tests := []struct {
		name  string
		state State
		want  Desired
	}{
		{name: "pass removes the current and every previous key", state: State{Passed: true, Passes: 1, StartupTainted: true},
			want: Desired{Remove: current, RemoveKeys: prevKeys, Label: "true"}},
		{name: "recovery removes them too", state: State{Passed: true, Passes: 2, Retainted: true},
			want: Desired{Remove: current, RemoveKeys: prevKeys, Label: "true"}},
		{name: "bypass removes them too", state: State{Bypass: true, Failures: 9},
			want: Desired{Remove: current, RemoveKeys: prevKeys, Unlabel: true}},
		{name: "a re-taint adds the current unhealthy taint, never a previous key", state: State{Failures: 3, Continuous: true},
			want: Desired{Add: &caStatus, Label: "false", Continuous: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.state, thresh, withPrev); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestUntaintPreviousKeysInOnePatch: a node created with the seed key under
// the cluster-autoscaler preset loses it, with anything of ours, in the one
// guarded patch that labels it, and keeps everybody else's taints.
func TestUntaintPreviousKeysInOnePatch(t *testing.T) {
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	seedNoExecute := corev1.Taint{Key: startup.Key, Value: "true", Effect: corev1.TaintEffectNoExecute}
	n := node([]corev1.Taint{other, startup, seedNoExecute, caStartup}, nil)
	startupTainted, retainted := NodeState(n, withPrev, "node-ready/verified")
	want := Decide(State{Passed: true, Passes: 1, StartupTainted: startupTainted, Retainted: retainted}, thresh, withPrev)
	patch, err := NodePatch(n, "node-ready/verified", want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := applyPatch(t, n, patch)
	if err != nil {
		t.Fatalf("apply %s: %v", patch, err)
	}
	if !reflect.DeepEqual(got.Spec.Taints, []corev1.Taint{other}) || got.Labels["node-ready/verified"] != "true" {
		t.Errorf("after the untaint: taints %v, labels %v; want [%v] and verified=true", got.Spec.Taints, got.Labels, other)
	}
	// The patch is guarded by the taint list it was made from.
	changed := node([]corev1.Taint{startup}, nil)
	if _, err := applyPatch(t, changed, patch); err == nil {
		t.Error("the untaint applied to a node whose taints changed since")
	}
}

// TestStepPreviousKeys runs the loop's step on nodes carrying previous
// keys: one created with the seed startup taint is verified (and, while
// failing, left as it is: still being verified, never re-tainted), one
// re-tainted with the seed unhealthy taint recovers, and a re-taint adds
// the configured unhealthy taint.
func TestStepPreviousKeys(t *testing.T) {
	tests := []struct {
		name      string
		node      *corev1.Node
		roundErr  error
		failures  int
		passes    int
		wantTaint []string
		wantLabel string
		wantEvent []string
	}{
		{name: "created with the seed key, round passes: verified, the key removed",
			node: testNode("n1", []corev1.Taint{startup}, nil, nil), wantLabel: "true", wantEvent: []string{api.EventNodeVerified}},
		{name: "created with the seed key, rounds fail: still being verified, nothing written",
			node: testNode("n1", []corev1.Taint{startup}, nil, nil), roundErr: errDNS, failures: 5, wantTaint: []string{startup.Key}},
		{name: "re-tainted with the seed unhealthy key, second pass: recovered, the key removed",
			node: testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil), passes: 1, wantLabel: "true", wantEvent: []string{api.EventNodeVerified}},
		{name: "re-tainted with the seed unhealthy key, first pass: kept",
			node: testNode("n1", []corev1.Taint{unhealthy}, retaintedLabel, nil), wantTaint: []string{unhealthy.Key}, wantLabel: "false"},
		{name: "verified node, third failure: the configured unhealthy taint",
			node: testNode("n1", nil, verifiedLabels, nil), roundErr: errDNS, failures: 2,
			wantTaint: []string{caStatus.Key}, wantLabel: "false", wantEvent: []string{api.EventNodeRetainted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t, tt.node)
			a, rec := startTestAgent(t, f, stubCheck{err: tt.roundErr}, func(c *Config) { c.Taints = withPrev })
			a.loop.failures, a.loop.passes = tt.failures, tt.passes
			a.step(t.Context())
			got := f.node("n1")
			var keys []string
			for _, taint := range got.Spec.Taints {
				keys = append(keys, taint.Key)
			}
			if !slices.Equal(keys, tt.wantTaint) || got.Labels["node-ready/verified"] != tt.wantLabel {
				t.Errorf("taints %v, label %q; want %v, %q", keys, got.Labels["node-ready/verified"], tt.wantTaint, tt.wantLabel)
			}
			if ev := rec.got(); !slices.Equal(ev, tt.wantEvent) {
				t.Errorf("events = %v, want %v", ev, tt.wantEvent)
			}
		})
	}
}
