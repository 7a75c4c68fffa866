package agent

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	startup   = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	unhealthy = corev1.Taint{Key: "node-ready/unhealthy", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	taints    = Taints{Startup: startup, Unhealthy: unhealthy}
	thresh    = Thresholds{Retaint: 3, Recover: 2}
)

func TestDecide(t *testing.T) {
	both := []corev1.Taint{startup, unhealthy}
	retaint := Desired{Add: &unhealthy, Label: "false", Continuous: true}
	tests := []struct {
		name   string
		state  State
		taints Taints
		want   Desired
	}{
		{name: "pass untaints and labels", state: State{Passed: true, Passes: 1, StartupTainted: true},
			want: Desired{Remove: both, Label: "true"}},
		{name: "pass on verified node keeps it", state: State{Passed: true, Passes: 5, Continuous: true},
			want: Desired{Remove: both, Label: "true", Continuous: true}},
		{name: "first failure on verified node does nothing", state: State{Failures: 1, Continuous: true}},
		{name: "second failure does nothing", state: State{Failures: 2, Continuous: true}},
		{name: "third failure re-taints with the unhealthy taint", state: State{Failures: 3, Continuous: true}, want: retaint},
		{name: "start-up failures keep the startup taint and add nothing", state: State{Failures: 9, StartupTainted: true}},
		{name: "continuous failures on a node carrying the startup taint add nothing", state: State{Failures: 9, StartupTainted: true, Continuous: true}},
		{name: "failures of the bootstrap set never re-taint, startup taint or not", state: State{Failures: 9}},
		{name: "re-tainted node failing on is left alone", state: State{Failures: 9, Retainted: true, Continuous: true}},
		{name: "re-tainted node waits for the recover threshold", state: State{Passed: true, Passes: 1, Retainted: true, Continuous: true}},
		{name: "re-tainted node untainted after the recover threshold", state: State{Passed: true, Passes: 2, Retainted: true, Continuous: true},
			want: Desired{Remove: both, Label: "true", Continuous: true}},
		{name: "bypass untaints even while failing", state: State{Bypass: true, Failures: 9, StartupTainted: true},
			want: Desired{Remove: both, Unlabel: true}},
		{name: "bypass never re-taints", state: State{Bypass: true, Failures: 9, Continuous: true}, want: Desired{Remove: both, Unlabel: true}},
		{name: "startup taint as re-taint taint (old behaviour)", state: State{Failures: 3, Continuous: true},
			taints: Taints{Startup: startup, Unhealthy: startup}, want: Desired{Add: &startup, Label: "false", Continuous: true}},
		{name: "old behaviour recovers by removing the startup taint", state: State{Passed: true, Passes: 2, Retainted: true, Continuous: true},
			taints: Taints{Startup: startup, Unhealthy: startup}, want: Desired{Remove: []corev1.Taint{startup}, Label: "true", Continuous: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := tt.taints
			if tn.Startup == (corev1.Taint{}) {
				tn = taints
			}
			if got := Decide(tt.state, thresh, tn); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBootstrapRound: only a node being verified for the first time runs
// the bootstrap checks and gates; every node in service, labelled by us or
// not, is judged by the continuous checks, the only ones that can re-taint
// it. A bootstrap-only agent runs the bootstrap set to recover a re-tainted
// node, as nothing else would untaint it.
func TestBootstrapRound(t *testing.T) {
	verified := map[string]string{"node-ready/verified": "true"}
	retainted := map[string]string{"node-ready/verified": "false"}
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name                  string
		node                  *corev1.Node
		want, wantBootstrapOn bool // with continuous checks; bootstrap-only
	}{
		{name: "new node with the startup taint", node: node([]corev1.Taint{startup}, nil), want: true, wantBootstrapOn: true},
		{name: "new node with a previous startup key", node: node([]corev1.Taint{{Key: "readiness.k8s.io/node-ready", Effect: corev1.TaintEffectNoSchedule}}, nil),
			want: true, wantBootstrapOn: true},
		{name: "verified node", node: node(nil, verified)},
		{name: "verified node the startup taint was put back on", node: node([]corev1.Taint{startup}, verified)},
		{name: "live node without any taint or label of ours (chart installed into a running cluster)", node: node(nil, nil)},
		{name: "live node with someone else's taint", node: node([]corev1.Taint{other}, map[string]string{"a": "b"})},
		{name: "re-tainted node", node: node([]corev1.Taint{unhealthy}, retainted), wantBootstrapOn: true},
		{name: "unhealthy taint without our label", node: node([]corev1.Taint{unhealthy}, nil), wantBootstrapOn: true},
		{name: "verified=false with no taint left", node: node(nil, retainted), wantBootstrapOn: true},
	}
	withPrevious := taints
	withPrevious.PreviousStartup = []string{"readiness.k8s.io/node-ready"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BootstrapRound(tt.node, withPrevious, "node-ready/verified", false); got != tt.want {
				t.Errorf("BootstrapRound = %v, want %v", got, tt.want)
			}
			if got := BootstrapRound(tt.node, withPrevious, "node-ready/verified", true); got != tt.wantBootstrapOn {
				t.Errorf("BootstrapRound of a bootstrap-only agent = %v, want %v", got, tt.wantBootstrapOn)
			}
		})
	}
}

func TestNodeState(t *testing.T) {
	tests := []struct {
		name                     string
		node                     *corev1.Node
		taints                   Taints
		wantStartup, wantRetaint bool
	}{
		{name: "new node", node: node([]corev1.Taint{startup}, nil), wantStartup: true},
		{name: "verified", node: node(nil, map[string]string{"node-ready/verified": "true"})},
		{name: "re-tainted", node: node([]corev1.Taint{unhealthy}, map[string]string{"node-ready/verified": "false"}), wantRetaint: true},
		{name: "unhealthy taint without label", node: node([]corev1.Taint{unhealthy}, nil), wantRetaint: true},
		{name: "old behaviour re-tainted with the startup taint", node: node([]corev1.Taint{startup}, map[string]string{"node-ready/verified": "false"}),
			taints: Taints{Startup: startup, Unhealthy: startup}, wantRetaint: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := tt.taints
			if tn.Startup == (corev1.Taint{}) {
				tn = taints
			}
			s, r := NodeState(tt.node, tn, "node-ready/verified")
			if s != tt.wantStartup || r != tt.wantRetaint {
				t.Errorf("NodeState = startup %v, retainted %v; want %v, %v", s, r, tt.wantStartup, tt.wantRetaint)
			}
		})
	}
}

func node(taints []corev1.Taint, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "7", Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
}

// applyPatch applies a patch the way the API server does and returns the result.
func applyPatch(t *testing.T, n *corev1.Node, patch []byte) (*corev1.Node, error) {
	t.Helper()
	orig, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch does not decode: %v: %s", err, patch)
	}
	out, err := p.Apply(orig)
	if err != nil {
		return nil, err
	}
	var got corev1.Node
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got, nil
}

func TestNodePatch(t *testing.T) {
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name       string
		node       *corev1.Node
		want       Desired
		wantTaints []corev1.Taint
		wantLabels map[string]string
		noPatch    bool
	}{
		{
			name: "remove only taint and add label to nil labels",
			node: node([]corev1.Taint{startup}, nil), want: Desired{Remove: []corev1.Taint{startup}, Label: "true"},
			wantTaints: nil, wantLabels: map[string]string{"node-ready/verified": "true"},
		},
		{
			name: "remove ours among others keeps theirs",
			node: node([]corev1.Taint{other, startup}, map[string]string{"a": "b"}), want: Desired{Remove: []corev1.Taint{startup, unhealthy}, Label: "true"},
			wantTaints: []corev1.Taint{other}, wantLabels: map[string]string{"a": "b", "node-ready/verified": "true"},
		},
		{
			name: "add to empty taints",
			node: node(nil, map[string]string{"node-ready/verified": "true"}), want: Desired{Add: &unhealthy, Label: "false"},
			wantTaints: []corev1.Taint{unhealthy}, wantLabels: map[string]string{"node-ready/verified": "false"},
		},
		{
			name: "append after other taints",
			node: node([]corev1.Taint{other}, map[string]string{}), want: Desired{Add: &unhealthy, Label: "false"},
			wantTaints: []corev1.Taint{other, unhealthy}, wantLabels: map[string]string{"node-ready/verified": "false"},
		},
		{
			name: "already as wanted writes nothing",
			node: node(nil, map[string]string{"node-ready/verified": "true"}), want: Desired{Remove: []corev1.Taint{startup}, Label: "true"}, noPatch: true,
		},
		{
			name: "recovery removes the unhealthy taint and keeps others in order",
			node: node([]corev1.Taint{other, unhealthy}, map[string]string{"node-ready/verified": "false"}), want: Desired{Remove: []corev1.Taint{startup, unhealthy}, Label: "true"},
			wantTaints: []corev1.Taint{other}, wantLabels: map[string]string{"node-ready/verified": "true"},
		},
		{
			name: "adding a taint the node has writes only the label",
			node: node([]corev1.Taint{unhealthy}, map[string]string{"node-ready/verified": "true"}), want: Desired{Add: &unhealthy, Label: "false"},
			wantTaints: []corev1.Taint{unhealthy}, wantLabels: map[string]string{"node-ready/verified": "false"},
		},
		{
			name: "empty label leaves label alone",
			node: node([]corev1.Taint{startup}, map[string]string{"node-ready/verified": "false"}), want: Desired{Remove: []corev1.Taint{startup}},
			wantTaints: nil, wantLabels: map[string]string{"node-ready/verified": "false"},
		},
		{
			name: "unlabel removes a false label and keeps the others",
			node: node([]corev1.Taint{unhealthy}, map[string]string{"a": "b", "node-ready/verified": "false"}), want: Desired{Remove: []corev1.Taint{startup, unhealthy}, Unlabel: true},
			wantTaints: nil, wantLabels: map[string]string{"a": "b"},
		},
		{
			name: "unlabel keeps a true label",
			node: node(nil, map[string]string{"node-ready/verified": "true"}), want: Desired{Remove: []corev1.Taint{startup, unhealthy}, Unlabel: true}, noPatch: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := NodePatch(tt.node, "node-ready/verified", tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if tt.noPatch {
				if patch != nil {
					t.Fatalf("patch = %s, want none", patch)
				}
				return
			}
			got, err := applyPatch(t, tt.node, patch)
			if err != nil {
				t.Fatalf("apply %s: %v", patch, err)
			}
			if len(got.Spec.Taints)+len(tt.wantTaints) > 0 && !reflect.DeepEqual(got.Spec.Taints, tt.wantTaints) {
				t.Errorf("taints = %v, want %v (patch %s)", got.Spec.Taints, tt.wantTaints, patch)
			}
			if !reflect.DeepEqual(got.Labels, tt.wantLabels) {
				t.Errorf("labels = %v, want %v", got.Labels, tt.wantLabels)
			}
		})
	}
}

func TestNodePatchFailsOnConcurrentEdit(t *testing.T) {
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	seen := node([]corev1.Taint{other, startup}, nil)
	patch, err := NodePatch(seen, "node-ready/verified", Desired{Remove: []corev1.Taint{startup}, Label: "true"})
	if err != nil {
		t.Fatal(err)
	}
	// Someone removed "dedicated" meanwhile: the list the patch replaces is gone.
	now := node([]corev1.Taint{startup}, nil)
	if _, err := applyPatch(t, now, patch); err == nil {
		t.Fatal("patch made from a stale taint list applied to a changed node")
	}
	// Adding to a node with no taints is guarded by resourceVersion.
	add, _ := NodePatch(node(nil, nil), "node-ready/verified", Desired{Add: &unhealthy})
	changed := node(nil, nil)
	changed.ResourceVersion = "8"
	if _, err := applyPatch(t, changed, add); err == nil {
		t.Fatal("add patch applied although the node changed")
	}
	// So is a label with no taint change (a live node labelled verified):
	// the node may have gained the startup taint since.
	for _, seen := range []*corev1.Node{node(nil, nil), node([]corev1.Taint{other}, map[string]string{"a": "b"})} {
		label, _ := NodePatch(seen, "node-ready/verified", Desired{Remove: []corev1.Taint{startup, unhealthy}, Label: "true", Continuous: true})
		now := seen.DeepCopy()
		now.Spec.Taints = append(now.Spec.Taints, startup)
		now.ResourceVersion = "8"
		if got, err := applyPatch(t, now, label); err == nil {
			t.Errorf("label patch %s applied to a node that changed since: labels %v", label, got.Labels)
		}
		if _, err := applyPatch(t, seen, label); err != nil {
			t.Errorf("label patch %s failed on the node it was made from: %v", label, err)
		}
	}
}

func TestRetaintAllowed(t *testing.T) {
	if !RetaintAllowed(1, 2) || RetaintAllowed(2, 2) {
		t.Error("RetaintAllowed: one more than the limit must be refused, up to it allowed")
	}
}
