package agent

import (
	"context"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/watches"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// nodeView is the agent's view of its own node: a field-selected watch
// (never all nodes), and the node as the agent's own last write or direct
// read returned it, which is newer than the watch's copy until the watch
// delivers that write. Decisions are made on the fresher of the two. The
// agent reads and writes its node through it (read, patch, patchStatus).
type nodeView struct {
	name     string
	nodes    corev1client.NodeInterface
	informer cache.SharedIndexInformer
	// episodes logs the watch's refusals once per episode.
	episodes *watches.Episodes

	mu sync.Mutex
	// written is the node as the agent's last write (or read) returned it.
	written *corev1.Node
}

func newNodeView(nodes corev1client.NodeInterface, name string, log *slog.Logger) *nodeView {
	own := fields.OneTermEqualSelector("metadata.name", name).String()
	eps := watches.New(log, &corev1.Node{})
	lw := eps.ListWatch(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = own
			return nodes.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = own
			return nodes.Watch(ctx, o)
		},
	)
	return &nodeView{name: name, nodes: nodes, episodes: eps, informer: cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})}
}

// node returns the freshest known state of the node: the watch's copy, or
// the agent's own last write (or read) when that is newer. nil when the
// watch does not have the node.
func (v *nodeView) node() *corev1.Node {
	obj, ok, err := v.informer.GetStore().GetByKey(v.name)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	if n == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.written != nil && newer(v.written, n) {
		return v.written
	}
	v.written = nil
	return n
}

// remember keeps n, the node as a write or a direct read returned it.
func (v *nodeView) remember(n *corev1.Node) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.written == nil || newer(n, v.written) {
		v.written = n
	}
}

// refresh reads the node from the API server and keeps it when it is newer
// than what the watch holds: after the watch expires the reflector re-lists
// on its own backoff, and decisions meanwhile stay on the node's current
// state.
func (v *nodeView) refresh(ctx context.Context) {
	_, _ = v.read(ctx)
}

// read reads the node from the API server (etcd, never a cache: the node as
// it is now) and keeps it.
func (v *nodeView) read(ctx context.Context) (*corev1.Node, error) {
	n, err := v.nodes.Get(ctx, v.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	v.remember(n)
	return n, nil
}

// patch writes a JSON patch to the node, as the agent's field manager, and
// keeps what it returns. The patch carries its own guard (NodePatch's test
// ops): a node that changed under it fails it with 422.
func (v *nodeView) patch(ctx context.Context, patch []byte) (*corev1.Node, error) {
	n, err := v.nodes.Patch(ctx, v.name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerAgent})
	if err != nil {
		return nil, err
	}
	v.remember(n)
	return n, nil
}

// patchStatus writes a strategic-merge patch of the agent's conditions to
// the node's status, as the agent's field manager, and keeps what it
// returns.
func (v *nodeView) patchStatus(ctx context.Context, patch []byte) error {
	n, err := v.nodes.Patch(ctx, v.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerAgent}, "status")
	if err != nil {
		return err
	}
	v.remember(n)
	return nil
}

// newer reports whether a is a later version of the same node than b.
// Resource versions compare only where the server says they do (etcd's do);
// otherwise a is not taken as newer.
func newer(a, b *corev1.Node) bool {
	if a.UID != b.UID {
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	}
	c, err := resourceversion.CompareResourceVersion(a.ResourceVersion, b.ResourceVersion)
	return err == nil && c > 0
}
