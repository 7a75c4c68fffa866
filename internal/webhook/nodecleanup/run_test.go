package nodecleanup

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// An update the informer delivered between the worker's cache read and its
// registration of the run found nothing to cancel; startRun must see it.
func TestStartRunSeesChangesTheInformerCouldNotCancel(t *testing.T) {
	const skip = "infra.894.io/skip-cleanup"
	now := metav1.Now()
	node := func(edit func(*metav1.ObjectMeta)) *metav1.PartialObjectMetadata {
		m := metav1.ObjectMeta{Name: "n", UID: "u1", DeletionTimestamp: &now, Finalizers: []string{"a/b", fin}}
		if edit != nil {
			edit(&m)
		}
		return &metav1.PartialObjectMetadata{ObjectMeta: m}
	}
	tests := []struct {
		name   string
		cached *metav1.PartialObjectMetadata // nil: gone from the cache
		want   error
	}{
		{"unchanged", node(nil), nil},
		{"bypass annotation set", node(func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{skip: "true"} }), errBypassed},
		{"re-created under the same name", node(func(m *metav1.ObjectMeta) { m.UID = "u2"; m.DeletionTimestamp = nil }), errReplaced},
		{"gone", nil, errReplaced},
		{"our finalizer removed by someone else", node(func(m *metav1.ObjectMeta) { m.Finalizers = []string{"a/b"} }), errReplaced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if tt.cached != nil {
				if err := idx.Add(tt.cached); err != nil {
					t.Fatal(err)
				}
			}
			c := &Controller{
				clock:   clock.RealClock{},
				cfg:     Config{Finalizer: fin, SkipAnnotation: skip},
				lister:  cache.NewGenericLister(idx, NodesResource.GroupResource()),
				running: map[string]*runningClean{},
			}
			_, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if got := c.startRun(node(nil), cancel); !errors.Is(got, tt.want) {
				t.Errorf("startRun = %v, want %v", got, tt.want)
			}
			if c.running["n"] == nil {
				t.Error("run not registered: a later update could not cancel it")
			}
		})
	}
}

// Plugin errors often carry '%' (URL escapes); an Event must show them as they are.
func TestEventNoteIsNotAFormat(t *testing.T) {
	rec := events.NewFakeRecorder(1)
	c := &Controller{clock: clock.RealClock{}, cfg: Config{Recorder: rec}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u1"}}
	c.event(node, corev1.EventTypeWarning, api.EventCleanupFailed, "Cleanup", "failed: %s", errors.New("DELETE /v1/cluster/a%2Fb"))
	if got := <-rec.Events; !strings.Contains(got, "a%2Fb") {
		t.Errorf("event %q, want the error unchanged", got)
	}
}
