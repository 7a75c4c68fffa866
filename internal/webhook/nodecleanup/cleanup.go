package nodecleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// healthMaxAge is how old a plugin health verdict may be when a cleanup
// attempt starts.
const healthMaxAge = 10 * time.Second

// syncCleanup runs the pipeline for a Node being deleted and removes our
// finalizer when no critical plugin failed. An error requeues the Node with
// backoff; the bypass annotation short-cuts everything.
func (c *Controller) syncCleanup(ctx context.Context, name string, requeues int) error {
	m, err := c.cached(name)
	if m == nil || err != nil {
		return err
	}
	if m.DeletionTimestamp == nil || !c.carries(m) {
		return nil
	}
	if c.skipped(m) {
		return c.bypass(ctx, m)
	}
	pipeline := c.cfg.Pipeline()
	if pipeline == nil {
		return c.hold(m)
	}
	attempt := requeues + 1
	node := nodeOf(m)
	log := c.log.With("node", name, "uid", string(m.UID), "attempt", attempt)

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer c.endRun(name, m.UID)
	if cause := c.startRun(m, cancel); cause != nil {
		return c.interrupted(ctx, m, cause, log)
	}

	if attempt == 1 {
		log.Info("node cleanup started", "plugins", pipeline.Names(), "dry_run", pipeline.DryRun())
		c.event(node, corev1.EventTypeNormal, api.EventCleanupStarted, "Cleanup", "cleanup started: plugins %s%s", strings.Join(pipeline.Names(), ", "), dryRunNote(pipeline))
	}
	start := c.clock.Now()
	// A probe at most healthMaxAge old: at a mass scale-in the receivers are
	// probed a few times, not once per node. A failed verdict must also be
	// newer than this node's previous counted attempt, so that this attempt
	// counts towards the cleanup deadline on an answer of its own.
	unhealthy := c.cfg.Health.Unhealthy(runCtx, pipeline, healthMaxAge, c.lastTry(m))
	for name, err := range unhealthy {
		log.Warn("cleanup plugin unhealthy; not running it in this attempt", "plugin", name, "error", err.Error())
	}
	// Created after the probe, so no plugin is shown running while it is
	// only being probed.
	status := c.newStatusWriter(ctx, name, m.UID, newStatus(pipeline.After(), attempt))
	defer status.stop()
	res := pipeline.RunObserved(runCtx, node, attempt, unhealthy, status.finish)
	if ctx.Err() != nil {
		return ctx.Err() // stopping or no longer leading: the next leader resumes
	}
	if runCtx.Err() != nil {
		return c.interrupted(ctx, m, context.Cause(runCtx), log)
	}
	for _, f := range res.OptionalFailures() {
		log.Warn("optional cleanup plugin failed; continuing", "plugin", f.Name, "result", f.Result, "error", f.Err.Error())
		c.event(node, corev1.EventTypeWarning, api.EventCleanupPluginFailed, "Cleanup", "optional plugin %s failed (%s), continuing: %s", f.Name, f.Result, f.Err)
	}
	if res.Err != nil {
		tried := c.countTry(m, res)
		if c.releasable(m, tried) {
			return c.releaseAfterDeadline(ctx, m, node, res, pipeline, attempt, tried, log)
		}
		retry := c.retryDelay(requeues)
		log.Warn("node cleanup failed; finalizer kept", "error", res.Err.Error(), "results", res.Summary(), "tried", tried, "retry_in_seconds", retry.Seconds())
		// The node's status first, which also stops the first attempt's
		// status timer: once the Event is out, the attempt waits on no
		// clock until the retry is queued.
		status.failed(retry)
		c.event(node, corev1.EventTypeWarning, api.EventCleanupFailed, "Cleanup", "cleanup attempt %d failed, finalizer kept, retrying in %s%s: %s", attempt, retry, c.deadlineNote(m, tried), res.Err)
		c.nodes.WithLabelValues("failed").Inc()
		pipeline.Finished(ctx, node, attempt, res.Err)
		if in, due := c.deadlineBeforeRetry(m, retry); due {
			return &deadlineDue{err: res.Err, in: in}
		}
		return res.Err
	}
	removed, err := RemoveFinalizer(ctx, c.client, name, m.UID, m.Finalizers, c.owned()...)
	if err != nil {
		log.Warn("cleanup done but the finalizer could not be removed; retrying", "error", err.Error())
		return err
	}
	if !removed {
		log.Info("node gone or replaced before its finalizer was removed")
		return nil
	}
	c.nodes.WithLabelValues("completed").Inc()
	log.Info("node cleanup completed; finalizer removed", "results", res.Summary(), "duration_seconds", c.clock.Since(start).Seconds())
	c.event(node, corev1.EventTypeNormal, api.EventCleanupCompleted, "Cleanup", "cleanup completed in %s (%s)%s; finalizer removed", c.clock.Since(start).Round(time.Millisecond), res.Summary(), dryRunNote(pipeline))
	pipeline.Finished(ctx, node, attempt, nil)
	return nil
}

// bypass removes the finalizer without running plugins.
func (c *Controller) bypass(ctx context.Context, m *metav1.PartialObjectMetadata) error {
	removed, err := RemoveFinalizer(ctx, c.client, m.Name, m.UID, m.Finalizers, c.owned()...)
	if err != nil {
		return err
	}
	if removed {
		c.nodes.WithLabelValues("skipped").Inc()
		c.log.Warn("node cleanup skipped by annotation; finalizer removed", "node", m.Name, "uid", string(m.UID), "annotation", c.cfg.SkipAnnotation)
		c.event(nodeOf(m), corev1.EventTypeWarning, api.EventCleanupSkipped, "Cleanup", "%s=true: finalizer removed without running cleanup plugins", c.cfg.SkipAnnotation)
	}
	return nil
}

// interrupted finishes a cleanup of m that was cancelled with cause: a
// bypass removes the finalizer at once; a Node that is gone, re-created or no
// longer ours leaves nothing to do. Any other cause is returned (requeue).
func (c *Controller) interrupted(ctx context.Context, m *metav1.PartialObjectMetadata, cause error, log *slog.Logger) error {
	switch {
	case errors.Is(cause, errBypassed):
		if latest, _ := c.cached(m.Name); latest != nil && latest.UID == m.UID {
			return c.bypass(ctx, latest)
		}
	case !errors.Is(cause, errReplaced):
		return cause
	}
	log.Info("node cleanup abandoned", "reason", cause.Error())
	return nil
}

// startRun registers a running cleanup of m so that the informer can cancel
// it. An update that reached the informer after m was read from the cache but
// before the registration found nothing to cancel, so the cache is read again
// afterwards: the cause when m changed that way, nil when the cleanup may run.
// (The informer updates its cache before it calls the handlers, so every
// update is seen by one side or the other.)
func (c *Controller) startRun(m *metav1.PartialObjectMetadata, cancel context.CancelCauseFunc) error {
	c.mu.Lock()
	c.running[m.Name] = &runningClean{uid: m.UID, cancel: cancel}
	c.mu.Unlock()
	latest, err := c.cached(m.Name)
	switch {
	case err != nil:
		return err
	case latest == nil || latest.UID != m.UID || latest.DeletionTimestamp == nil || !c.carries(latest):
		return errReplaced
	case c.skipped(latest):
		return errBypassed
	}
	return nil
}

func (c *Controller) endRun(name string, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.running[name]; r != nil && r.uid == uid {
		delete(c.running, name)
	}
}

// retryDelay mirrors the cleanup queue's rate limiter for messages.
func (c *Controller) retryDelay(requeues int) time.Duration {
	d := c.cfg.RetryBase
	for range requeues {
		d *= 2
		if d >= c.cfg.RetryMax {
			return c.cfg.RetryMax
		}
	}
	return min(d, c.cfg.RetryMax)
}

func (c *Controller) event(node *corev1.Node, eventType, reason, action, note string, args ...any) {
	if c.cfg.Recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	// The note is formatted here (to shorten it), so it must not be a format
	// again: plugin errors carry '%' (URL escapes) that would turn into %!x(MISSING).
	c.cfg.Recorder.Eventf(ref, nil, eventType, reason, action, "%s", eventnote.Shorten(fmt.Sprintf(note, args...)))
}

// nodeOf is the Node plugins see: metadata only.
func nodeOf(m *metav1.PartialObjectMetadata) *corev1.Node {
	return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: *m.ObjectMeta.DeepCopy()}
}

func dryRunNote(p *cleanup.Pipeline) string {
	if p.DryRun() {
		return " (dry run: plugins only reported)"
	}
	return ""
}
