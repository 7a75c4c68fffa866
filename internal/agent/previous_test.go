package agent

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		{name: "a re-taint adds the current unhealthy taint, never a previous key", state: State{Failures: 3},
			want: Desired{Add: &caStatus, Label: "false"}},
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
