package nodecleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// tries counts one node's failed attempts that asked every critical
// plugin's system something (cleanup.Result.AskedSince): what the cleanup
// deadline waits for besides time. An attempt asks when it calls a critical
// plugin, or leaves it out for a failed health probe that started after the
// node's previous counted attempt ended (the health check probes again when
// its verdict is older), so every counted attempt rests on an answer of its
// own and a receiver that is down cannot hold a node past the deadline.
// It lives in the leader's memory only, so a new leader starts from zero
// and tries again before it releases anything.
type tries struct {
	uid types.UID
	n   int
	// last is when the node's latest counted attempt ended; a probe that
	// started before then is no answer for the next one.
	last time.Time
	// held is set once the node was reported held for want of a valid
	// cleanup configuration.
	held bool
}

// lastTry is when m's latest counted attempt ended (zero: none yet).
func (c *Controller) lastTry(m *metav1.PartialObjectMetadata) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.tries[m.Name]; t.uid == m.UID {
		return t.last
	}
	return time.Time{}
}

// countTry records a failed attempt of m's cleanup that just ended and
// returns how many of its failed attempts, this one included, asked every
// critical plugin's system: called it, or probed it afresh.
func (c *Controller) countTry(m *metav1.PartialObjectMetadata, res cleanup.Result) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tries[m.Name]
	if t.uid != m.UID {
		t = tries{uid: m.UID}
	}
	if res.AskedSince(t.last) {
		t.n++
		t.last = c.clock.Now()
	}
	c.tries[m.Name] = t
	return t.n
}

// releasable reports whether failing critical plugins have held m long
// enough: past the deadline (from the deletionTimestamp) and after
// MinAttempts attempts that asked them. Time alone never releases a node:
// a webhook back from an outage longer than the deadline has asked nobody
// yet.
func (c *Controller) releasable(m *metav1.PartialObjectMetadata, tried int) bool {
	return c.pastDeadline(m) && tried >= c.cfg.MinAttempts
}

// deadlineNote tells, in a failed attempt's Event, why a node past its
// deadline is still held.
func (c *Controller) deadlineNote(m *metav1.PartialObjectMetadata, tried int) string {
	if !c.pastDeadline(m) {
		return ""
	}
	return fmt.Sprintf(" (cleanup deadline %s passed; the finalizer is removed after %d attempts that called or probed the critical plugins, %d so far)",
		c.cfg.Deadline, c.cfg.MinAttempts, tried)
}

// deadlineDue is a failed cleanup whose deadline comes before its next retry.
type deadlineDue struct {
	err error
	in  time.Duration
}

func (d *deadlineDue) Error() string { return d.err.Error() }
func (d *deadlineDue) Unwrap() error { return d.err }

// deadlineBeforeRetry reports whether m's deadline comes before its next
// retry, and in how long: then it is looked at again at the deadline. Past
// the deadline (a node still waiting for real attempts) the backoff rules,
// or the plugins would be called in a tight loop.
func (c *Controller) deadlineBeforeRetry(m *metav1.PartialObjectMetadata, retry time.Duration) (time.Duration, bool) {
	left := c.deadlineLeft(m)
	return left, c.cfg.Deadline > 0 && left > 0 && left < retry
}

// deadlineLeft is the time until m's cleanup deadline (negative past it).
func (c *Controller) deadlineLeft(m *metav1.PartialObjectMetadata) time.Duration {
	if m.DeletionTimestamp == nil {
		return c.cfg.Deadline
	}
	return m.DeletionTimestamp.Add(c.cfg.Deadline).Sub(c.clock.Now())
}

func (c *Controller) pastDeadline(m *metav1.PartialObjectMetadata) bool {
	return c.cfg.Deadline > 0 && c.deadlineLeft(m) <= 0
}

// releaseAfterDeadline removes the finalizer of a node whose critical
// plugins still fail past the cleanup deadline, and says so loudly: what
// they did not do is now someone's manual work.
func (c *Controller) releaseAfterDeadline(ctx context.Context, m *metav1.PartialObjectMetadata, node *corev1.Node, res cleanup.Result, pipeline *cleanup.Pipeline, attempt, tried int, log *slog.Logger) error {
	removed, err := RemoveFinalizer(ctx, c.client, m.Name, m.UID, m.Finalizers, c.owned()...)
	if err != nil {
		log.Warn("cleanup deadline passed but the finalizer could not be removed; retrying", "error", err.Error())
		return err
	}
	pipeline.Finished(ctx, node, attempt, res.Err)
	if !removed {
		return nil
	}
	c.nodes.WithLabelValues("deadline_exceeded").Inc()
	log.Warn("cleanup deadline passed with critical plugins failing; finalizer removed anyway",
		"deadline_seconds", c.cfg.Deadline.Seconds(), "tried", tried, "error", res.Err.Error(), "results", res.Summary())
	c.event(node, corev1.EventTypeWarning, api.EventCleanupDeadlineExceeded, "Cleanup",
		"cleanup deadline (%s) passed after %d attempts that called or probed the critical plugins; finalizer removed although critical plugins failed: %s", c.cfg.Deadline, tried, res.Err)
	return nil
}

// heldRecheck is how often a node held for want of a valid configuration is
// looked at again (the configuration is re-read every --config-reload-interval).
const heldRecheck = 10 * time.Second

// errHeld requeues a node whose cleanup cannot start: no valid configuration.
var errHeld = errors.New("no valid cleanup configuration: deletion held")

// hold keeps m's finalizer while there is no valid cleanup configuration,
// and says so once per node: neither the plugins nor the deadline act on a
// node nothing was tried on. The webhook keeps serving admission and
// back-fill meanwhile.
func (c *Controller) hold(m *metav1.PartialObjectMetadata) error {
	c.mu.Lock()
	t := c.tries[m.Name]
	if t.uid != m.UID {
		t = tries{uid: m.UID}
	}
	first := !t.held
	t.held = true
	c.tries[m.Name] = t
	c.mu.Unlock()
	if first {
		why := "unknown"
		if c.cfg.ConfigError != nil {
			if err := c.cfg.ConfigError(); err != nil {
				why = err.Error()
			}
		}
		c.nodes.WithLabelValues("held").Inc()
		c.log.Error("node deletion held: the cleanup configuration is invalid", "node", m.Name, "uid", string(m.UID), "error", why)
		c.event(nodeOf(m), corev1.EventTypeWarning, api.EventCleanupHeld, "Cleanup",
			"deletion held: the cleanup configuration is invalid, no plugin runs and the finalizer stays until it is fixed (or %s=true): %s", c.cfg.SkipAnnotation, why)
	}
	return errHeld
}
