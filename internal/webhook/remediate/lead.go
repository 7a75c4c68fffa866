package remediate

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Lead watches the unverified nodes and scans them every Interval until ctx
// ends (the process stops or leadership is lost).
func (c *Controller) Lead(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	if c.cfg.Policy == PolicyOff {
		return nil
	}
	// A new leader, or this one again, judges nothing it has not watched for
	// a deadline itself.
	c.obs, c.brks = newObserver(c, c.clock.Now()), newBreakers(c.cfg.Breaker)
	c.refused, c.held = refusals{}, false // a refusal seen first is dated now
	if c.cfg.Policy != PolicyReplace {
		c.brks.cfg = Breaker{} // nothing to stop: never opens
	}
	sel := c.cfg.VerifiedLabel + "!=true"
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	lister, synced, err := c.watch(factory)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("remediate: node cache never synced")
	}
	defer c.zero()
	// The breakers the cluster shows, not closed ones: a leader change must
	// not resume replacing in a pool whose new nodes keep failing.
	if cached, err := lister.List(labels.Everything()); err == nil {
		for _, pool := range c.rebuild(cached, c.clock.Now()) {
			c.log.Warn("circuit breaker open from the start: the pool's new nodes already past the deadline fail it",
				"pool", pool, "reason", c.breakerText(pool))
		}
	}
	c.log.Info("remediation running; every unverified node gets a full deadline from now before it is judged",
		"policy", c.cfg.Policy, "unverified_deadline", c.cfg.Deadline, "dry_run", c.cfg.DryRun,
		"nodeclaims", c.cfg.NodeClaims, "selector", sel,
		"breaker_threshold", c.cfg.Breaker.Threshold, "breaker_window", c.cfg.Breaker.Window)
	c.scanEvery(ctx, lister)
	return nil
}

// scanEvery scans the cached unverified nodes, then again Interval after
// each scan ends, on c.clock, until ctx ends.
func (c *Controller) scanEvery(ctx context.Context, lister corelisters.NodeLister) {
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for ctx.Err() == nil {
		if nodes, err := lister.List(labels.Everything()); err != nil {
			c.log.Error("list cached unverified nodes", "error", err)
		} else {
			c.scan(ctx, nodes)
		}
		if timer == nil {
			timer = c.clock.NewTimer(c.cfg.Interval)
		} else {
			timer.Reset(c.cfg.Interval)
		}
		select {
		case <-ctx.Done():
		case <-timer.C():
		}
	}
}

// watch sets up the node informer of factory (label-selected to the
// unverified nodes) to feed this leadership's observer.
func (c *Controller) watch(factory informers.SharedInformerFactory) (corelisters.NodeLister, cache.InformerSynced, error) {
	inf := factory.Core().V1().Nodes()
	if err := inf.Informer().SetTransform(c.trim); err != nil {
		return nil, nil, fmt.Errorf("remediate: set transform: %w", err)
	}
	obs := c.obs
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { obs.observeObj(obj, c.clock.Now()) },
		UpdateFunc: func(_, obj any) { obs.observeObj(obj, c.clock.Now()) },
		DeleteFunc: obs.leaveObj,
	}); err != nil {
		return nil, nil, fmt.Errorf("remediate: add event handler: %w", err)
	}
	return inf.Lister(), inf.Informer().HasSynced, nil
}
