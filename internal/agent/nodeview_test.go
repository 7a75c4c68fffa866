package agent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNewer is the node view's freshness rule: a later resourceVersion of
// the same node, or a node created again under the same name (a new UID,
// created later), is newer; resource versions the server does not say
// compare are never taken as newer.
func TestNewer(t *testing.T) {
	old := testNode("n1", nil, nil, nil)
	old.ResourceVersion = "100"
	later := old.DeepCopy()
	later.ResourceVersion = "101"
	recreated := testNode("n1", nil, nil, nil)
	recreated.CreationTimestamp = metav1.NewTime(old.CreationTimestamp.Add(time.Minute))
	recreated.ResourceVersion = "5"
	opaque := old.DeepCopy()
	opaque.ResourceVersion = "abc"
	tests := []struct {
		name string
		a, b *corev1.Node
		want bool
	}{
		{"later version of the same node", later, old, true},
		{"earlier version of the same node", old, later, false},
		{"same version", old, old, false},
		{"node created again under the same name, lower resourceVersion", recreated, old, true},
		{"the deleted node is not newer than the one created after it", old, recreated, false},
		{"resourceVersions that do not compare", opaque, old, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newer(tt.a, tt.b); got != tt.want {
				t.Errorf("newer = %v, want %v", got, tt.want)
			}
		})
	}
	if old.UID == recreated.UID {
		t.Fatal("test nodes share a UID")
	}
}

// TestNodeViewDropsTheDeletedNodesWrite: the agent's own last write of a
// node that was then deleted and created again under the same name is not
// used over the new node the watch shows.
func TestNodeViewDropsTheDeletedNodesWrite(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
	a, _ := startTestAgent(t, f, stubCheck{}, nil)
	a.view.remember(f.node("n1"))
	f.remove("n1")
	fresh := testNode("n1", []corev1.Taint{startup}, nil, nil)
	fresh.CreationTimestamp = metav1.NewTime(time.Now())
	f.mu.Lock()
	f.put(fresh)
	f.mu.Unlock()
	waitFor(t, "the watch shows the new node", func() bool {
		n := a.view.node()
		return n != nil && n.UID == fresh.UID
	})
	a.view.refresh(t.Context())
	if n := a.view.node(); n.UID != fresh.UID || !HasTaint(n.Spec.Taints, startup) {
		t.Errorf("view shows %s %v, want the new node %s", n.UID, n.Spec.Taints, fresh.UID)
	}
}
