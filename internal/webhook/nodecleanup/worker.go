package nodecleanup

import (
	"context"
	"errors"

	"k8s.io/client-go/util/workqueue"
)

func (c *Controller) runWorker(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string, int) error) {
	for c.processNextWorkItem(ctx, q, sync) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string, int) error) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	if err := sync(ctx, key, q.NumRequeues(key)); err != nil {
		if ctx.Err() != nil {
			return false // stopping; the next leader picks the node up
		}
		if errors.Is(err, errHeld) {
			// Not an attempt: look again soon, without growing the backoff.
			q.Forget(key)
			q.AddAfter(key, min(c.cfg.RetryMax, heldRecheck))
			return true
		}
		// The backoff may outrun a cleanup deadline: look again when it
		// passes. Queued before the backoff, so the first timer the node
		// waits on is the one that comes first.
		var d *deadlineDue
		if errors.As(err, &d) {
			q.AddAfter(key, d.in)
		}
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}
