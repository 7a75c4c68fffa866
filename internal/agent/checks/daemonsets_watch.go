package checks

import (
	"context"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// WorkloadClient lists and watches what the DaemonSet gate reads.
type WorkloadClient interface {
	ListPods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	WatchPods(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	ListDaemonSets(ctx context.Context, opts metav1.ListOptions) (*appsv1.DaemonSetList, error)
	WatchDaemonSets(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// daemonSetWatch keeps the DaemonSets of the cluster and the pods on this
// node in caches for the DaemonSet gate: one field-selected watch of pods
// and one watch of DaemonSets, trimmed to what the gate reads. It runs only
// while the gate is needed (a bootstrap gate stops it once the node is
// verified), so a node in service pays nothing for it.
type daemonSetWatch struct {
	client   WorkloadClient
	nodeName string
	// changed is called on every change, from the informers' goroutines.
	changed func()

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	ds     cache.SharedIndexInformer
	pods   cache.SharedIndexInformer
}

// start runs the watches unless they already run.
func (w *daemonSetWatch) start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		return
	}
	onNode := fields.OneTermEqualSelector("spec.nodeName", w.nodeName).String()
	w.pods = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = onNode
			return w.client.ListPods(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = onNode
			return w.client.WatchPods(ctx, o)
		},
	}, &corev1.Pod{}, 0, cache.Indexers{})
	w.ds = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return w.client.ListDaemonSets(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return w.client.WatchDaemonSets(ctx, o)
		},
	}, &appsv1.DaemonSet{}, 0, cache.Indexers{})
	for _, inf := range []cache.SharedIndexInformer{w.pods, w.ds} {
		// Errors here only mean the informer already started, which it has not.
		_ = inf.SetTransform(trimForGate)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { w.changed() },
			UpdateFunc: func(any, any) { w.changed() },
			DeleteFunc: func(any) { w.changed() },
		})
	}
	ctx, w.cancel = context.WithCancel(ctx)
	w.done = make(chan struct{})
	pods, ds, done := w.pods, w.ds, w.done
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Go(func() { pods.RunWithContext(ctx) })
		wg.Go(func() { ds.RunWithContext(ctx) })
		wg.Wait()
	}()
}

// stop ends the watches and drops the caches.
func (w *daemonSetWatch) stop() {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.cancel, w.done, w.ds, w.pods = nil, nil, nil, nil
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// DaemonSets implements DaemonSetSource.
func (w *daemonSetWatch) DaemonSets() []*appsv1.DaemonSet {
	return listOf[*appsv1.DaemonSet](w.informer(func() cache.SharedIndexInformer { return w.ds }))
}

// PodsOnNode implements DaemonSetSource.
func (w *daemonSetWatch) PodsOnNode() []*corev1.Pod {
	return listOf[*corev1.Pod](w.informer(func() cache.SharedIndexInformer { return w.pods }))
}

// Synced implements DaemonSetSource.
func (w *daemonSetWatch) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ds != nil && w.ds.HasSynced() && w.pods.HasSynced()
}

func (w *daemonSetWatch) informer(pick func() cache.SharedIndexInformer) cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return pick()
}

func listOf[T any](inf cache.SharedIndexInformer) []T {
	if inf == nil {
		return nil
	}
	var out []T
	for _, obj := range inf.GetStore().List() {
		if t, ok := obj.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// trimForGate keeps only what the gate reads, so a cluster with many large
// DaemonSets costs the agent little memory on every node.
func trimForGate(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.DaemonSet:
		spec := o.Spec.Template.Spec
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, UID: o.UID, Labels: o.Labels, ResourceVersion: o.ResourceVersion},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeName: spec.NodeName, NodeSelector: spec.NodeSelector, Affinity: spec.Affinity,
				Tolerations: spec.Tolerations, HostNetwork: spec.HostNetwork,
			}}},
		}, nil
	case *corev1.Pod:
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion,
				OwnerReferences: o.OwnerReferences, DeletionTimestamp: o.DeletionTimestamp,
			},
			Status: corev1.PodStatus{Conditions: o.Status.Conditions},
		}, nil
	}
	return obj, nil
}
