// Package finalizer keeps the node-cleanup finalizer on every Node: a
// metadata-only informer sees each Node, and a worker pool adds the finalizer
// to any that lack it and are not being deleted (nodes created while the
// admission webhook was down, or before it was installed).
//
// It follows the sample-controller shape (informer, typed rate-limited
// workqueue, Run(ctx, workers), syncHandler) so that the deletion half — run
// cleanup plugins when a Node gets a deletionTimestamp — can be added as
// another branch of sync.
package finalizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// NodesResource is what the informer lists and the patches target.
var NodesResource = corev1.SchemeGroupVersion.WithResource("nodes")

// Controller adds the finalizer to Nodes that lack it.
type Controller struct {
	client    metadata.Interface
	finalizer string
	lister    cache.GenericLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	log       *slog.Logger

	mu        sync.Mutex
	finalized map[string]struct{} // nodes that carry the finalizer, for the gauge
	patches   *prometheus.CounterVec
}

// New builds a controller on factory's Node metadata informer; call
// factory.Start after New so the informer has its handlers.
func New(client metadata.Interface, factory metadatainformer.SharedInformerFactory, finalizer string, reg prometheus.Registerer, log *slog.Logger) (*Controller, error) {
	inf := factory.ForResource(NodesResource)
	c := &Controller{
		client:    client,
		finalizer: finalizer,
		lister:    inf.Lister(),
		synced:    inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-finalizer"}),
		log:       log,
		finalized: map[string]struct{}{},
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_cleanup_finalizer_backfill_total",
			Help: "Finalizer back-fill patches on Nodes that lacked it, by result (success, error).",
		}, []string{"result"}),
	}
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "node_cleanup_nodes_with_finalizer",
		Help: "Nodes in the informer cache that carry the node-cleanup finalizer.",
	}, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.finalized))
	})
	if err := reg.Register(gauge); err != nil {
		return nil, fmt.Errorf("finalizer: register metrics: %w", err)
	}
	if err := reg.Register(c.patches); err != nil {
		return nil, fmt.Errorf("finalizer: register metrics: %w", err)
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.observe,
		UpdateFunc: func(_, obj any) { c.observe(obj) },
		DeleteFunc: c.forget,
	})
	if err != nil {
		return nil, fmt.Errorf("finalizer: add event handler: %w", err)
	}
	return c, nil
}

// HasSynced reports whether the informer has listed every Node once.
func (c *Controller) HasSynced() bool { return c.synced() }

func (c *Controller) observe(obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	c.track(m.Name, slices.Contains(m.Finalizers, c.finalizer))
	if NeedsFinalizer(m, c.finalizer) {
		c.queue.Add(m.Name)
	}
}

func (c *Controller) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		c.track(m.Name, false)
	}
}

func (c *Controller) track(name string, has bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if has {
		c.finalized[name] = struct{}{}
	} else {
		delete(c.finalized, name)
	}
}

// Run waits for the cache, then runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	c.log.Info("finalizer back-fill starting", "workers", workers)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return errors.New("finalizer: node cache never synced")
	}
	c.log.Info("node cache synced", "nodes_with_finalizer", c.count())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown() // wakes workers blocked in Get
	wg.Wait()
	return nil
}

func (c *Controller) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.finalized)
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		c.log.Warn("finalizer back-fill failed; retrying", "node", key, "error", err, "retries", c.queue.NumRequeues(key))
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync brings one Node to the desired state: not being deleted → carries the
// finalizer. (Nodes being deleted are the cleanup half's business.)
func (c *Controller) sync(ctx context.Context, name string) error {
	obj, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return fmt.Errorf("unexpected object %T in the node cache", obj)
	}
	if !NeedsFinalizer(m, c.finalizer) {
		return nil
	}
	patch, err := AddFinalizerPatch(m.Finalizers, c.finalizer)
	if err != nil {
		return err
	}
	_, err = c.client.Resource(NodesResource).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "kube-node-ready-webhook"})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		c.patches.WithLabelValues("error").Inc()
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	c.patches.WithLabelValues("success").Inc()
	c.log.Info("finalizer added to node", "node", name, "finalizer", c.finalizer)
	return nil
}

// NeedsFinalizer reports whether a Node must get the finalizer: it lacks it
// and is not being deleted (a deleting Node cannot gain finalizers).
func NeedsFinalizer(m *metav1.PartialObjectMetadata, finalizer string) bool {
	return m.DeletionTimestamp == nil && !slices.Contains(m.Finalizers, finalizer)
}

// AddFinalizerPatch is a JSON patch that adds finalizer to a Node whose
// finalizers are current, and fails (test op) if they changed since, so a
// concurrent writer's finalizer is never overwritten.
func AddFinalizerPatch(current []string, finalizer string) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if len(current) == 0 {
		// A missing list tests equal to null.
		return json.Marshal([]op{
			{Op: "test", Path: "/metadata/finalizers", Value: nil},
			{Op: "add", Path: "/metadata/finalizers", Value: []string{finalizer}},
		})
	}
	return json.Marshal([]op{
		{Op: "test", Path: "/metadata/finalizers", Value: current},
		{Op: "add", Path: "/metadata/finalizers/-", Value: finalizer},
	})
}
