package agent

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var startup = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}

func TestDecide(t *testing.T) {
	tests := []struct {
		name     string
		bypass   bool
		passed   bool
		failures int
		tainted  bool
		want     Desired
	}{
		{name: "pass untaints and labels", passed: true, tainted: true, want: Desired{Taint: false, Label: "true"}},
		{name: "pass on verified node keeps it", passed: true, want: Desired{Taint: false, Label: "true"}},
		{name: "first failure on verified node does nothing", failures: 1, want: Desired{Taint: false}},
		{name: "second failure does nothing", failures: 2, want: Desired{Taint: false}},
		{name: "third failure re-taints", failures: 3, want: Desired{Taint: true, Label: "false"}},
		{name: "start-up failure keeps taint", failures: 1, tainted: true, want: Desired{Taint: true}},
		{name: "bypass untaints even while failing", bypass: true, failures: 9, tainted: true, want: Desired{Taint: false}},
		{name: "bypass never re-taints", bypass: true, failures: 9, want: Desired{Taint: false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.bypass, tt.passed, tt.failures, 3, tt.tainted); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
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
			node: node([]corev1.Taint{startup}, nil), want: Desired{Label: "true"},
			wantTaints: nil, wantLabels: map[string]string{"node-ready/verified": "true"},
		},
		{
			name: "remove ours among others keeps theirs",
			node: node([]corev1.Taint{other, startup}, map[string]string{"a": "b"}), want: Desired{Label: "true"},
			wantTaints: []corev1.Taint{other}, wantLabels: map[string]string{"a": "b", "node-ready/verified": "true"},
		},
		{
			name: "add to empty taints",
			node: node(nil, map[string]string{"node-ready/verified": "true"}), want: Desired{Taint: true, Label: "false"},
			wantTaints: []corev1.Taint{startup}, wantLabels: map[string]string{"node-ready/verified": "false"},
		},
		{
			name: "append after other taints",
			node: node([]corev1.Taint{other}, map[string]string{}), want: Desired{Taint: true, Label: "false"},
			wantTaints: []corev1.Taint{other, startup}, wantLabels: map[string]string{"node-ready/verified": "false"},
		},
		{
			name: "already as wanted writes nothing",
			node: node(nil, map[string]string{"node-ready/verified": "true"}), want: Desired{Label: "true"}, noPatch: true,
		},
		{
			name: "empty label leaves label alone",
			node: node([]corev1.Taint{startup}, map[string]string{"node-ready/verified": "false"}), want: Desired{},
			wantTaints: nil, wantLabels: map[string]string{"node-ready/verified": "false"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := NodePatch(tt.node, startup, "node-ready/verified", tt.want)
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
	patch, err := NodePatch(seen, startup, "node-ready/verified", Desired{Label: "true"})
	if err != nil {
		t.Fatal(err)
	}
	// Someone removed "dedicated" meanwhile: index 1 is no longer our taint.
	now := node([]corev1.Taint{startup}, nil)
	if _, err := applyPatch(t, now, patch); err == nil {
		t.Fatal("patch made from a stale taint list applied to a changed node")
	}
	// Adding to a node with no taints is guarded by resourceVersion.
	add, _ := NodePatch(node(nil, nil), startup, "node-ready/verified", Desired{Taint: true})
	changed := node(nil, nil)
	changed.ResourceVersion = "8"
	if _, err := applyPatch(t, changed, add); err == nil {
		t.Fatal("add patch applied although the node changed")
	}
}

func TestBudget(t *testing.T) {
	tests := []struct {
		spec    string
		total   int
		limit   int
		wantErr bool
	}{
		{spec: "10%", total: 100, limit: 10},
		{spec: "10%", total: 5, limit: 1},
		{spec: "10%", total: 0, limit: 1},
		{spec: "50%", total: 4, limit: 2},
		{spec: "3", total: 100, limit: 3},
		{spec: "0", wantErr: true},
		{spec: "-1", wantErr: true},
		{spec: "0%", wantErr: true},
		{spec: "101%", wantErr: true},
		{spec: "lots", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			b, err := ParseBudget(tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && b.Limit(tt.total) != tt.limit {
				t.Errorf("Limit(%d) = %d, want %d", tt.total, b.Limit(tt.total), tt.limit)
			}
		})
	}
	if !RetaintAllowed(1, 2) || RetaintAllowed(2, 2) {
		t.Error("RetaintAllowed: one more than the limit must be refused, up to it allowed")
	}
}

func TestParseTaint(t *testing.T) {
	if got, err := ParseTaint("node-ready/unverified=true:NoSchedule"); err != nil || got != startup {
		t.Errorf("ParseTaint = %v, %v", got, err)
	}
	for _, bad := range []string{"", "no-effect", "k=v:Sometimes", "bad key!=v:NoSchedule"} {
		if _, err := ParseTaint(bad); err == nil {
			t.Errorf("ParseTaint(%q) accepted", bad)
		}
	}
}
