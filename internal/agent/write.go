package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// apply patches the node toward want, re-reading it and retrying when a
// concurrent edit makes the guarded patch fail. It writes nothing when the
// node already matches.
func (a *Agent) apply(ctx context.Context, want Desired) error {
	node := a.cachedNode()
	if node == nil {
		return errors.New("node not in cache")
	}
	defer func() {
		// The gauge follows the node, whether this call wrote or found it done.
		v := !HasTaint(node.Spec.Taints, a.taints.Startup) && !HasTaint(node.Spec.Taints, a.taints.Unhealthy) &&
			node.Labels[a.opts.VerifiedLabel] == "true"
		a.metrics.verified.Set(map[bool]float64{true: 1, false: 0}[v])
	}()
	bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ExponentialBackOff{
		InitialInterval: 50 * time.Millisecond, Multiplier: 2, RandomizationFactor: 0.3,
		MaxInterval: 2 * time.Second, Stop: backoff.Stop, Clock: backoff.SystemClock,
	}, 5), ctx)
	bo.Reset()
	for {
		if want.IsRetaint() {
			if why := a.retaintRefusedOn(node); why != "" {
				a.log.Info("re-taint dropped: the node changed since the decision", "reason", why)
				return nil
			}
		}
		patch, err := NodePatch(node, a.opts.VerifiedLabel, want)
		if err != nil || patch == nil {
			return err
		}
		op := a.operation(node, want)
		updated, err := a.client.PatchNode(ctx, node.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "kube-node-ready-agent"})
		if err == nil {
			a.count(op, "success")
			a.remember(updated)
			a.afterWrite(node, updated, op)
			node = updated
			return nil
		}
		// A failed test op comes back as 422 Invalid, like any other
		// rejection (an admission policy, say): only a node that changed
		// under us is a conflict worth retrying at once.
		if !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) {
			a.count(op, "error")
			return fmt.Errorf("patch node: %w", err)
		}
		fresh, getErr := a.client.GetNode(ctx, a.opts.NodeName)
		if getErr != nil {
			a.count(op, "error")
			return fmt.Errorf("patch node: %w (re-read failed: %v)", err, getErr)
		}
		if fresh.ResourceVersion == node.ResourceVersion {
			a.count(op, "error")
			return fmt.Errorf("patch node: rejected: %w", err)
		}
		a.count(op, "conflict")
		a.remember(fresh)
		node = fresh
		d := bo.NextBackOff()
		if d == backoff.Stop {
			return fmt.Errorf("patch node: still conflicting after retries: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// operation names the taint change want makes on node for the metrics and
// logs: "add" (re-taint), "remove" (untaint) or "" (label only).
func (a *Agent) operation(node *corev1.Node, want Desired) string {
	if want.Add != nil && !HasTaint(node.Spec.Taints, *want.Add) {
		return "add"
	}
	for _, t := range want.Remove {
		if HasTaint(node.Spec.Taints, t) {
			return "remove"
		}
	}
	return ""
}

func (a *Agent) count(op, result string) {
	if op != "" {
		a.metrics.taintOps.WithLabelValues(op, result).Inc()
	}
}

// afterWrite logs, records Events and sets metrics for a successful patch.
func (a *Agent) afterWrite(before, after *corev1.Node, op string) {
	switch op {
	case "remove":
		if a.bypassed(after) {
			a.log.Info("taints removed: bypass annotation set", "annotation", a.opts.SkipAnnotation)
			a.event(after, corev1.EventTypeNormal, ReasonVerified, "Untaint", "taints removed without checks: annotation %s=true", a.opts.SkipAnnotation)
			return
		}
		if !a.everVerified && HasTaint(before.Spec.Taints, a.taints.Startup) {
			a.everVerified = true
			secs := time.Since(before.CreationTimestamp.Time).Seconds()
			a.metrics.timeToVerified.Set(secs)
			a.log.Info("node verified; startup taint removed", "since_creation_seconds", secs)
			a.event(after, corev1.EventTypeNormal, ReasonVerified, "Untaint", "all checks passed; startup taint %s removed", a.opts.StartupTaint)
			return
		}
		a.everVerified = true
		a.log.Info("checks pass again; node untainted", "passed_rounds", a.passes)
		a.event(after, corev1.EventTypeNormal, ReasonVerified, "Untaint", "checks passed %d rounds in a row; node untainted", a.thresh.Recover)
	case "add":
		a.log.Warn("node re-tainted after consecutive failed rounds", "consecutive_failures", a.failures, "taint", taintString(a.taints.Unhealthy))
		a.event(after, corev1.EventTypeWarning, ReasonRetainted, "Taint", "checks failed %d rounds in a row; taint %s applied", a.thresh.Retaint, taintString(a.taints.Unhealthy))
	}
}

func (a *Agent) event(node *corev1.Node, eventType, reason, action, note string, args ...any) {
	if a.recorder == nil {
		return
	}
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	a.recorder.Eventf(ref, eventType, reason, action, note, args...)
}
