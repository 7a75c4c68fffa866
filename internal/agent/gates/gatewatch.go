package gates

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	waitpkg "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/watches"
)

// objectSource is what a gate fed by one watch reads: its cache.
type objectSource interface {
	// objects returns what the watch holds.
	objects() []any
	// synced reports whether the first list arrived.
	synced() bool
}

// fieldWatch keeps in a cache the objects of one resource that a field
// selector picks (the node's own CSINode, ResourceSlices or pods), for a
// gate. It runs only while the gate is needed, so a node in service pays
// nothing.
type fieldWatch struct {
	// selector is the field selector every list and watch carries; empty
	// selects every object (the DaemonSets of the cluster).
	selector string
	// example is an object of the watched type, for the informer.
	example runtime.Object
	list    func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch   func(context.Context, metav1.ListOptions) (watch.Interface, error)
	// changed is called on every change, from the informer's goroutine.
	changed func()
	// trim, when set, keeps only what the gate reads of each object.
	trim cache.TransformFunc
	// log receives the watch's refusals, once per episode.
	log *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	inf    cache.SharedIndexInformer
}

// start runs the watch unless it runs already.
func (w *fieldWatch) start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		return
	}
	eps := watches.New(w.log, w.example, "field_selector", w.selector)
	w.inf = cache.NewSharedIndexInformer(eps.ListWatch(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = w.selector
			return w.list(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = w.selector
			return w.watch(ctx, o)
		},
	), w.example, 0, cache.Indexers{})
	// Errors here only mean the informer already started, which it has not.
	_ = eps.Attach(w.inf, nil)
	if w.trim != nil {
		_ = w.inf.SetTransform(w.trim)
	}
	_, _ = w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.changed() },
		UpdateFunc: func(any, any) { w.changed() },
		DeleteFunc: func(any) { w.changed() },
	})
	ctx, w.cancel = context.WithCancel(ctx)
	w.done = make(chan struct{})
	inf, done := w.inf, w.done
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
}

// stop ends the watch and drops the cache.
func (w *fieldWatch) stop() {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.cancel, w.done, w.inf = nil, nil, nil
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// objects implements objectSource.
func (w *fieldWatch) objects() []any {
	w.mu.Lock()
	inf := w.inf
	w.mu.Unlock()
	if inf == nil {
		return nil
	}
	return inf.GetStore().List()
}

// synced implements objectSource.
func (w *fieldWatch) synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inf != nil && w.inf.HasSynced()
}

// watchGate is what the CSI and DRA gates share: a gate answered from one
// fieldWatch's cache, so a round costs no request, whose watch wakes the
// loop when the gate's wait ends.
type watchGate struct {
	// source is what the gate reads; the watch, or a fake in tests.
	source objectSource
	// watch feeds source when the gate was built from its flags.
	watch *fieldWatch
	// met reports whether the gate passes on what source holds.
	met  func() bool
	host checks.GateHost
}

// Attach implements Gate.
func (g *watchGate) Attach(h checks.GateHost) { g.host = h }

// Start implements Gate: it runs the watch and waits at most wait for its
// first list (which takes milliseconds).
func (g *watchGate) Start(ctx context.Context, wait time.Duration) {
	if g.watch == nil {
		return
	}
	g.watch.start(ctx)
	waitSynced(ctx, wait, g.watch.synced)
}

// waitSynced waits at most wait for a gate's first lists: a round before
// them would fail the gate and cost a new node a backoff step. The lists
// take milliseconds.
func waitSynced(ctx context.Context, wait time.Duration, synced func() bool) {
	_ = waitpkg.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait, true, func(context.Context) (bool, error) {
		return synced(), nil
	})
}

// Stop implements Gate.
func (g *watchGate) Stop() {
	if g.watch != nil {
		g.watch.stop()
	}
}

// Changed implements Gate: the gate's answer follows its own watch, not
// the node (see changed).
func (*watchGate) Changed(_, _ *corev1.Node) bool { return false }

// changed wakes the loop when the gate, the last thing a new node may be
// waiting for, now passes: the untaint should not wait for the next
// backoff step.
func (g *watchGate) changed() {
	if g.host != nil && g.host.Verifying() && g.source.synced() && g.met() {
		g.host.Wake()
	}
}
