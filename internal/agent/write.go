package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
)

// apply patches the node toward want, re-reading it and retrying when a
// concurrent edit makes the guarded patch fail. It writes nothing when the
// node already matches.
func (a *Agent) apply(ctx context.Context, want Desired) error {
	node := a.view.node()
	if node == nil {
		return errors.New("node not in cache")
	}
	defer func() {
		// The gauge follows the node, whether this call wrote or found it done.
		t := a.cfg.Taints
		v := !t.startupOn(node.Spec.Taints) && !HasTaint(node.Spec.Taints, t.Unhealthy) && !t.unhealthyOn(node.Spec.Taints) &&
			node.Labels[a.cfg.VerifiedLabel] == "true"
		a.metrics.verified.Set(metricsserver.Bool(v))
	}()
	bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ExponentialBackOff{
		InitialInterval: 50 * time.Millisecond, Multiplier: 2, RandomizationFactor: 0.3,
		MaxInterval: 2 * time.Second, Stop: backoff.Stop, Clock: a.clock,
	}, 5), ctx)
	bo.Reset()
	for {
		if why := a.refusedOn(node, want); why != "" {
			a.log.Info("node write dropped: the node changed since the decision", "reason", why)
			return nil
		}
		patch, err := NodePatch(node, a.cfg.VerifiedLabel, want)
		if err != nil || patch == nil {
			return err
		}
		op := a.operation(node, want)
		updated, err := a.view.patch(ctx, patch)
		if err == nil {
			a.count(op, "success")
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
		fresh, getErr := a.view.read(ctx)
		if getErr != nil {
			a.count(op, "error")
			return fmt.Errorf("patch node: %w (re-read failed: %v)", err, getErr)
		}
		if fresh.ResourceVersion == node.ResourceVersion {
			a.count(op, "error")
			return fmt.Errorf("patch node: rejected: %w", err)
		}
		a.count(op, "conflict")
		node = fresh
		d := bo.NextBackOff()
		if d == backoff.Stop {
			return fmt.Errorf("patch node: still conflicting after retries: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.clock.After(d):
		}
	}
}

// refusedOn says why want must not be written to node, in the version the
// patch applies to, or "". A re-taint has gates of its own
// (retaintRefusedOn); a change decided on a round of the continuous checks
// never verifies a node that now needs every check and gate: the startup
// taint arrived, on a node without our label, after the decision (the node
// was deleted and created again under the same name, say).
func (a *Agent) refusedOn(node *corev1.Node, want Desired) string {
	if want.IsRetaint() {
		if why := a.retaintRefusedOn(node, want); why != "" {
			return "re-taint: " + why
		}
	}
	if want.Continuous && a.bootstrapRound(node) {
		return "the node carries the startup taint and not our label: it is verified by the bootstrap checks and gates"
	}
	return ""
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
	if HasAnyTaintKey(node.Spec.Taints, want.RemoveKeys) != "" {
		return "remove"
	}
	return ""
}

// startupRemoved names the startup taint node carried: the configured one,
// else the previous key it was created with.
func (a *Agent) startupRemoved(node *corev1.Node) string {
	t := a.cfg.Taints
	if HasTaint(node.Spec.Taints, t.Startup) {
		return taintString(t.Startup)
	}
	return HasAnyTaintKey(node.Spec.Taints, t.PreviousStartup)
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
		if a.cfg.Taints.startupOn(before.Spec.Taints) {
			// Verified now, under this boot (reboot.go); a bypass too:
			// the operator vouches for the node as it runs.
			a.loop.boot = bootID(after)
		}
		if a.bypassed(after) {
			a.log.Info("taints removed: bypass annotation set", "annotation", a.cfg.BypassAnnotation)
			a.event(after, corev1.EventTypeNormal, api.EventNodeVerified, "Untaint", "taints removed without checks: annotation %s=true", a.cfg.BypassAnnotation)
			return
		}
		if RebootHeld(before, a.cfg.Taints, a.cfg.VerifiedLabel) {
			a.loop.everVerified = true
			a.log.Info("node verified again after a reboot; startup taint removed", "boot_id", a.loop.boot)
			a.event(after, corev1.EventTypeNormal, api.EventNodeVerified, "Untaint", "all checks and gates passed after a reboot; startup taint %s removed", a.startupRemoved(before))
			return
		}
		if !a.loop.everVerified && a.cfg.Taints.startupOn(before.Spec.Taints) {
			a.loop.everVerified = true
			secs := a.clock.Since(before.CreationTimestamp.Time).Seconds()
			a.metrics.timeToVerified.Set(secs)
			a.log.Info("node verified; startup taint removed", "since_creation_seconds", secs)
			a.event(after, corev1.EventTypeNormal, api.EventNodeVerified, "Untaint", "all checks passed; startup taint %s removed", a.startupRemoved(before))
			return
		}
		a.loop.everVerified = true
		a.log.Info("checks pass again; node untainted", "passed_rounds", a.loop.passes)
		a.event(after, corev1.EventTypeNormal, api.EventNodeVerified, "Untaint", "checks passed %d rounds in a row; node untainted", a.cfg.Thresholds.Recover)
	case "":
		if before.Labels[a.cfg.VerifiedLabel] != "true" && after.Labels[a.cfg.VerifiedLabel] == "true" {
			// No Event: at an install into a running cluster every node
			// gets here at once, and nothing about its scheduling changed.
			a.log.Info("node labelled verified: no taint of ours to remove", "label", a.cfg.VerifiedLabel)
		}
	case "add":
		if !a.cfg.Taints.startupOn(before.Spec.Taints) && a.cfg.Taints.startupOn(after.Spec.Taints) {
			a.log.Warn("node rebooted since it was verified; held with the startup taint until verified again",
				"verified_boot_id", a.verifiedBoot(before), "boot_id", bootID(after), "taint", taintString(a.cfg.Taints.Startup))
			a.event(after, corev1.EventTypeWarning, api.EventNodeHeldAfterReboot, "Taint",
				"the node rebooted since it was verified (boot ID %s, verified under %s); taint %s applied until every check and gate passes again",
				bootID(after), a.verifiedBoot(before), taintString(a.cfg.Taints.Startup))
			return
		}
		a.log.Warn("node re-tainted after consecutive failed rounds", "consecutive_failures", a.loop.failures, "taint", taintString(a.cfg.Taints.Unhealthy))
		a.event(after, corev1.EventTypeWarning, api.EventNodeRetainted, "Taint", "checks failed %d rounds in a row; taint %s applied", a.cfg.Thresholds.Retaint, taintString(a.cfg.Taints.Unhealthy))
	}
}

func (a *Agent) event(node *corev1.Node, eventType, reason, action, note string, args ...any) {
	if a.recorder == nil {
		return
	}
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	a.recorder.Eventf(ref, eventType, reason, action, note, args...)
}

// setCondition writes the agent's condition on its node when it differs
// from what the node (as last seen) says. A failed write is logged once per
// streak and retried with the next round; it never holds up a decision.
func (a *Agent) setCondition(ctx context.Context, want ConditionState) {
	node := a.view.node()
	if node == nil {
		return
	}
	patch, err := ConditionPatch(node, a.stampBoot(node, want), a.clock.Now())
	if err != nil || patch == nil {
		return
	}
	a.patchConditions(ctx, patch)
}

// patchConditions writes patch (of the agent's conditions) to the node's
// status. A failed write is logged once per streak; the next round
// writes again.
func (a *Agent) patchConditions(ctx context.Context, patch []byte) {
	err := a.view.patchStatus(ctx, patch)
	switch {
	case err != nil && !a.loop.condErr:
		a.loop.condErr = true
		a.log.Warn("cannot write the node condition; will retry with later rounds", "condition", string(ConditionType), "error", err)
	case err == nil:
		a.loop.condErr = false
	}
}
