// Package nodecleanup is the node watcher of the webhook binary. A
// metadata-only informer sees every Node; while this replica holds the
// leader Lease, two worker pools act on it:
//
//   - back-fill: a Node that lacks the finalizer and is not being deleted gets
//     it (created while the admission webhook was down, or before install);
//   - cleanup: a Node with a deletionTimestamp and our finalizer runs the
//     cleanup pipeline, then loses only our finalizer, so deletion completes.
//
// It follows the sample-controller shape (informer, typed rate-limited
// workqueues, workers, sync functions). Queues live only while leading, and
// are refilled from the cache when leadership starts, so a new leader
// finishes whatever the old one left mid-cleanup.
package nodecleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// NodesResource is what the informer lists and the patches target.
var NodesResource = corev1.SchemeGroupVersion.WithResource("nodes")

// Config tunes the controller.
type Config struct {
	// Finalizer is ours.
	Finalizer string
	// Legacy are older names of ours: a node being deleted that carries one
	// is cleaned up like one with Finalizer and loses them all; back-fill
	// replaces them with Finalizer on the others. So a renamed finalizer
	// never holds a deletion that nothing removes. New adds every name the
	// project shipped (api.HonouredFinalizers), whatever is given here.
	Legacy []string
	// SkipAnnotation set to "true" on a Node removes the finalizer without cleanup.
	SkipAnnotation string
	// KeepAnnotations are annotations that others sharing the informer read
	// from its cache (the startup taint's missed-node reporter reads
	// api.StartupTaintAdmissionAnnotation); the cache keeps them beside
	// SkipAnnotation and drops every other.
	KeepAnnotations []string
	// Backfill turns on the back-fill pool with BackfillWorkers workers.
	Backfill        bool
	BackfillWorkers int
	// Cleanup turns on the cleanup pool with CleanupWorkers workers.
	Cleanup        bool
	CleanupWorkers int
	// RetryBase and RetryMax shape the per-node exponential backoff after a failed cleanup.
	RetryBase, RetryMax time.Duration
	// Deadline, when positive, bounds how long failing critical plugins hold
	// a node, counted from its deletionTimestamp: past it, and after
	// MinAttempts attempts that asked them, the finalizer is removed
	// anyway, with a Warning Event naming what failed.
	Deadline time.Duration
	// MinAttempts is how many failed attempts the deadline waits for, each
	// of which called every critical plugin or left it out for a failed
	// health probe newer than the node's previous attempt.
	MinAttempts int
	// Pipeline returns the pipeline for the next attempt (hot-reloaded
	// config); nil while no valid configuration was loaded: deletions are
	// then held, with ConfigError saying why.
	Pipeline func() *cleanup.Pipeline
	// ConfigError, when set, says why the cleanup configuration is invalid.
	ConfigError func() error
	// Health, when set, is asked before each attempt which plugins' health
	// probes fail; those are not run in that attempt (they fail at once).
	Health *cleanup.Health
	// Recorder records Events on Nodes; nil records none.
	Recorder events.EventRecorder
	// BackfillAllowed, when set, is asked before each back-fill patch; false
	// pauses back-fill (the webhook configuration is gone: uninstalling).
	BackfillAllowed func(ctx context.Context) bool
	// Clock is the time of the cleanup's rules: the deadline, the retries'
	// backoff, the attempts' ends, the status shown on a slow first attempt.
	// nil is the real clock; tests step a fake one.
	Clock clock.WithTickerAndDelayedExecution
}

// Controller is the node watcher.
type Controller struct {
	client metadata.Interface
	cfg    Config
	lister cache.GenericLister
	synced cache.InformerSynced
	log    *slog.Logger
	clock  clock.WithTickerAndDelayedExecution

	mu        sync.Mutex
	finalized map[string]struct{}                          // nodes that carry the finalizer, for the gauge
	pending   map[string]time.Time                         // deleting nodes with the finalizer → deletionTimestamp
	running   map[string]*runningClean                     // cleanups in progress, by node name
	tries     map[string]tries                             // deleting nodes → failed attempts that asked the critical plugins
	backfillQ workqueue.TypedRateLimitingInterface[string] // nil unless leading
	cleanupQ  workqueue.TypedRateLimitingInterface[string] // nil unless leading

	patches *prometheus.CounterVec
	nodes   *prometheus.CounterVec
	// statusWrites counts writes of the cleanup status annotation.
	statusWrites prometheus.Counter
	leader       prometheus.Gauge
}

type runningClean struct {
	uid    types.UID
	cancel context.CancelCauseFunc
}

// Causes with which a running cleanup is cancelled.
var (
	errBypassed = errors.New("skip-cleanup annotation set")
	errReplaced = errors.New("node deleted or re-created")
)

// New builds a controller on factory's Node metadata informer; call
// factory.Start after New so the informer has its handlers.
func New(client metadata.Interface, factory metadatainformer.SharedInformerFactory, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Controller, error) {
	inf := factory.ForResource(NodesResource)
	cfg.Legacy = api.HonouredFinalizers(cfg.Finalizer, cfg.Legacy)
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Controller{
		client:    client,
		cfg:       cfg,
		clock:     clk,
		lister:    inf.Lister(),
		log:       log,
		finalized: map[string]struct{}{},
		pending:   map[string]time.Time{},
		running:   map[string]*runningClean{},
		tries:     map[string]tries{},
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_cleanup_finalizer_backfill_total",
			Help: "Finalizer back-fill patches on Nodes that lacked it, by result (success, error).",
		}, []string{"result"}),
		nodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_cleanup_nodes_total",
			Help: "Node cleanup attempts by result (completed, failed, skipped, deadline_exceeded, held: a deleted node held for want of a valid configuration, once per node).",
		}, []string{"result"}),
		statusWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "node_cleanup_status_writes_total",
			Help: "Writes of the cleanup status annotation (" + StatusAnnotation + ") on nodes being cleaned up.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_cleanup_leader",
			Help: "1 while this replica holds the leader Lease and runs back-fill and cleanup.",
		}),
	}
	collectors := []prometheus.Collector{
		c.patches, c.nodes, c.leader, c.statusWrites,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "node_cleanup_nodes_with_finalizer",
			Help: "Nodes in the informer cache that carry the node-cleanup finalizer.",
		}, func() float64 { c.mu.Lock(); defer c.mu.Unlock(); return float64(len(c.finalized)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "node_cleanup_queue_depth",
			Help: "Nodes waiting in the cleanup queue of this replica (0 when not leading).",
		}, func() float64 {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.cleanupQ == nil {
				return 0
			}
			return float64(c.cleanupQ.Len())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "node_cleanup_oldest_pending_seconds",
			Help: "Age of the oldest deletionTimestamp among Nodes still held by the finalizer (0 when none).",
		}, c.oldestPending),
	}
	for _, col := range collectors {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("nodecleanup: register metrics: %w", err)
		}
	}
	// Keep only what the watcher and the plugins read (trim.go).
	if err := inf.Informer().SetTransform(c.trim); err != nil {
		return nil, fmt.Errorf("nodecleanup: set transform: %w", err)
	}
	handler, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(obj, true) },
		UpdateFunc: func(oldObj, obj any) { c.observe(obj, cleanupNews(oldObj, obj)) },
		DeleteFunc: c.forget,
	})
	if err != nil {
		return nil, fmt.Errorf("nodecleanup: add event handler: %w", err)
	}
	// Synced once the handler, not only the cache, has seen the first
	// list: Lead queues what the cache holds and starts its workers, and a
	// first-list notification still on its way would queue a node again
	// while its first attempt runs, a second attempt at once (seen on a
	// fake clock: TestCleanupTimingOnTheClock).
	c.synced = handler.HasSynced
	return c, nil
}

// NodeCount is the number of Nodes in the informer cache.
func (c *Controller) NodeCount() int {
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return 0
	}
	return len(all)
}

// HasSynced reports whether the informer has listed every Node once.
func (c *Controller) HasSynced() bool { return c.synced() }

// cleanupNews reports whether an update should (re)start a node's cleanup
// at once: the node just got its deletionTimestamp, was replaced, or this is
// the informer's periodic resync (the safety net). Any other change of a
// node being deleted — a status heartbeat, an annotation — must not cut a
// failed cleanup's backoff short.
func cleanupNews(oldObj, obj any) bool {
	o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
	n, ok2 := obj.(*metav1.PartialObjectMetadata)
	if !ok1 || !ok2 {
		return true
	}
	return o.DeletionTimestamp == nil || o.UID != n.UID || o.ResourceVersion == n.ResourceVersion
}

// observe records what the informer saw of a Node and queues the work it
// needs; enqueueCleanup says whether a node being deleted is (re)queued for
// cleanup now (the bypass annotation always is).
func (c *Controller) observe(obj any, enqueueCleanup bool) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	has := c.carries(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if has {
		c.finalized[m.Name] = struct{}{}
	} else {
		delete(c.finalized, m.Name)
	}
	deleting := m.DeletionTimestamp != nil && has
	if deleting {
		c.pending[m.Name] = m.DeletionTimestamp.Time
	} else {
		delete(c.pending, m.Name)
		delete(c.tries, m.Name)
	}
	if r := c.running[m.Name]; r != nil {
		switch {
		case r.uid != m.UID || !deleting:
			r.cancel(errReplaced)
		case c.skipped(m):
			r.cancel(errBypassed)
		}
	}
	if NeedsFinalizer(m, c.cfg.Finalizer, c.cfg.Legacy...) && c.backfillQ != nil {
		c.backfillQ.Add(m.Name)
	}
	if deleting && c.cleanupQ != nil {
		if c.skipped(m) {
			// Do not wait out a backoff: bypass now.
			c.cleanupQ.Forget(m.Name)
			c.cleanupQ.Add(m.Name)
		} else if enqueueCleanup {
			c.cleanupQ.Add(m.Name)
		}
	}
}

func (c *Controller) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.finalized, m.Name)
	delete(c.pending, m.Name)
	delete(c.tries, m.Name)
	if r := c.running[m.Name]; r != nil {
		r.cancel(errReplaced)
	}
}

// owned lists the finalizer names this controller removes: its own and the legacy ones.
func (c *Controller) owned() []string { return append([]string{c.cfg.Finalizer}, c.cfg.Legacy...) }

// carries reports whether m carries any finalizer of ours.
func (c *Controller) carries(m *metav1.PartialObjectMetadata) bool {
	return slices.ContainsFunc(m.Finalizers, func(f string) bool { return f == c.cfg.Finalizer || slices.Contains(c.cfg.Legacy, f) })
}

func (c *Controller) skipped(m *metav1.PartialObjectMetadata) bool {
	return c.cfg.SkipAnnotation != "" && m.Annotations[c.cfg.SkipAnnotation] == "true"
}

func (c *Controller) oldestPending() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Time
	for _, t := range c.pending {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return c.clock.Since(oldest).Seconds()
}

// Lead waits for the cache, then runs the worker pools until ctx ends (the
// process stops or leadership is lost). It can be called again afterwards.
func (c *Controller) Lead(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("nodecleanup: node cache never synced")
	}
	c.leader.Set(1)
	defer c.leader.Set(0)
	var wg sync.WaitGroup
	var bq, cq workqueue.TypedRateLimitingInterface[string]
	if c.cfg.Backfill {
		bq = workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-finalizer", Clock: c.clock})
	}
	if c.cfg.Cleanup {
		cq = workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](c.cfg.RetryBase, c.cfg.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-cleanup", Clock: c.clock})
	}
	c.mu.Lock()
	c.backfillQ, c.cleanupQ = bq, cq
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.backfillQ, c.cleanupQ = nil, nil
		c.mu.Unlock()
		if bq != nil {
			bq.ShutDown() // wakes workers blocked in Get
		}
		if cq != nil {
			cq.ShutDown()
		}
		wg.Wait()
		c.log.Info("node watcher stopped leading")
	}()
	// Whatever the cache holds now is the work a previous leader may have left.
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("nodecleanup: list cached nodes: %w", err)
	}
	for _, obj := range all {
		c.observe(obj, true)
	}
	c.log.Info("leading: node watcher running", "nodes_with_finalizer", c.count(), "pending_cleanups", c.countPending(),
		"backfill_workers", c.workers(c.cfg.Backfill, c.cfg.BackfillWorkers), "cleanup_workers", c.workers(c.cfg.Cleanup, c.cfg.CleanupWorkers))
	if bq != nil {
		for range c.cfg.BackfillWorkers {
			wg.Go(func() {
				wait.UntilWithContext(ctx, func(ctx context.Context) { c.runWorker(ctx, bq, c.syncBackfill) }, time.Second)
			})
		}
	}
	if cq != nil {
		for range c.cfg.CleanupWorkers {
			wg.Go(func() {
				wait.UntilWithContext(ctx, func(ctx context.Context) { c.runWorker(ctx, cq, c.syncCleanup) }, time.Second)
			})
		}
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) workers(on bool, n int) int {
	if !on {
		return 0
	}
	return n
}

func (c *Controller) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.finalized)
}

func (c *Controller) countPending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}
