package nodecleanup

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// eventually polls cond every few milliseconds for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// While leading, the watcher back-fills a node without the finalizer and
// cleans up a node being deleted, both found in the cache when leadership
// starts; when leadership ends its queues stop and its gauges say so.
func TestLeadBackfillsAndCleansUp(t *testing.T) {
	f := newServingFixture(t, nil, meta("new"), deleting("gone"))
	p := &plugin{name: "p"}
	f.pipeline = pipelineOf([]*plugin{p})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- f.c.Lead(ctx) }()

	eventually(t, "finalizer back-filled on the new node", func() bool { return slices.Equal(f.finalizers("new"), []string{fin}) })
	eventually(t, "finalizer removed from the node being deleted", func() bool { return slices.Equal(f.finalizers("gone"), []string{"a/b"}) })
	eventually(t, "the cache sees both nodes", func() bool { return f.c.HasSynced() && f.c.NodeCount() == 2 })
	eventually(t, "gauges follow the cache", func() bool {
		return f.gauge("node_cleanup_nodes_with_finalizer") == 1 && f.gauge("node_cleanup_oldest_pending_seconds") == 0
	})
	if f.gauge("node_cleanup_leader") != 1 {
		t.Error("node_cleanup_leader is not 1 while leading")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Lead: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lead did not return after its context ended")
	}
	if f.gauge("node_cleanup_leader") != 0 || f.gauge("node_cleanup_queue_depth") != 0 {
		t.Error("leader or queue-depth gauge not 0 after leadership ended")
	}
}

// The informer's notifications queue the work each node needs, cancel a
// running cleanup whose node was bypassed, re-created or deleted, and keep
// the gauges' bookkeeping.
func TestObserveAndForget(t *testing.T) {
	f := newFixture(t, nil)
	c := f.c
	c.backfillQ = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	c.cleanupQ = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer c.backfillQ.ShutDown()
	defer c.cleanupQ.ShutDown()

	c.observe(meta("bare"), true)
	if c.backfillQ.Len() != 1 || c.cleanupQ.Len() != 0 {
		t.Errorf("queues %d/%d after a node without the finalizer, want 1/0", c.backfillQ.Len(), c.cleanupQ.Len())
	}
	gone := deleting("gone", deletedAgo(time.Minute))
	c.observe(gone, false)
	if c.cleanupQ.Len() != 0 || c.countPending() != 1 || c.oldestPending() < 59 {
		t.Errorf("cleanup queue %d, pending %d, oldest %vs: want a mere update not queued, but counted", c.cleanupQ.Len(), c.countPending(), c.oldestPending())
	}
	var cause error
	c.running["gone"] = &runningClean{uid: gone.UID, cancel: func(err error) { cause = err }}
	bypassed := gone.DeepCopy()
	annotated(skipAnnotation, "true")(bypassed)
	c.observe(bypassed, false)
	if !errors.Is(cause, errBypassed) || c.cleanupQ.Len() != 1 {
		t.Errorf("cause %v, cleanup queue %d: want the run cancelled for the bypass and the node queued at once", cause, c.cleanupQ.Len())
	}
	c.observe(recreated(gone), true)
	if !errors.Is(cause, errReplaced) {
		t.Errorf("cause %v after the node was re-created, want errReplaced", cause)
	}
	cause = nil
	c.forget(cache.DeletedFinalStateUnknown{Key: "gone", Obj: gone})
	if !errors.Is(cause, errReplaced) || c.countPending() != 0 || c.oldestPending() != 0 {
		t.Errorf("cause %v, pending %d after the node was deleted: want the run cancelled and nothing pending", cause, c.countPending())
	}
	if c.count() != 0 {
		t.Errorf("%d nodes counted with the finalizer, want 0", c.count())
	}
}

// processNextWorkItem forgets a node on success, backs off on failure,
// looks again soon without backoff at a held node, and at the deadline when
// it comes before the backoff.
func TestProcessNextWorkItem(t *testing.T) {
	tests := []struct {
		name         string
		err          error
		wantRequeues int
		// wantBack: the node comes back within RetryMax (not only after
		// its backoff).
		wantBack bool
	}{
		{name: "success"},
		{name: "failure backs off", err: errBoom, wantRequeues: 1},
		{name: "held: looked at again without backoff", err: errHeld, wantBack: true},
		{name: "deadline before the retry", err: &deadlineDue{err: errBoom, in: time.Millisecond}, wantRequeues: 1, wantBack: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.RetryMax = 20 * time.Millisecond })
			q := workqueue.NewTypedRateLimitingQueue[string](workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour))
			defer q.ShutDown()
			q.Add("n")
			if !f.c.processNextWorkItem(t.Context(), q, func(context.Context, string, int) error { return tt.err }) {
				t.Fatal("worker stopped")
			}
			if got := q.NumRequeues("n"); got != tt.wantRequeues {
				t.Errorf("requeues %d, want %d", got, tt.wantRequeues)
			}
			if tt.wantBack {
				eventually(t, "the node queued again", func() bool { return q.Len() == 1 })
			}
		})
	}
	t.Run("stopping", func(t *testing.T) {
		f := newFixture(t, nil)
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		q.Add("n")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if f.c.processNextWorkItem(ctx, q, func(context.Context, string, int) error { return context.Canceled }) {
			t.Error("worker went on after its context ended")
		}
		q.ShutDown()
		if f.c.processNextWorkItem(t.Context(), q, nil) {
			t.Error("worker went on after its queue shut down")
		}
	})
}
