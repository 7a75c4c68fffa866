package agent

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
)

// Publish mode (Config.Publish, --mode=publish) works beside the node
// readiness controller (kubernetes-sigs/node-readiness-controller): a
// NodeReadinessRule that names the agent's condition owns the taint, and
// the agent only publishes the condition. It runs the same rounds as
// enforce and decides as enforce does (Decide), but what enforce would
// write as a taint it writes as the condition's status:
//
//   - a node not yet verified (no verified label "true") runs every check
//     and gate, on the start-up backoff; its condition is False/Verifying
//     until a round passes, then True/ChecksPassed, and the label "true"
//     records that its bootstrap is done (an agent restart does not repeat
//     it, as in enforce);
//   - a verified node runs the continuous checks; its condition goes
//     False/ChecksFailing only after --retaint-threshold failed rounds in a
//     row (as enforce would re-taint it; never while the suspend switch is
//     on or unreadable), and True again after --recover-threshold passed
//     rounds (False/Recovering meanwhile);
//   - with --publish-conditions=per-check each enabled check also gets a
//     condition of its own (node-ready/<check>): False while the node's
//     condition is False and that check failed in the round that said so,
//     True otherwise.
//
// It never adds a taint and never removes one a rule can own: every key
// under readiness.k8s.io/, the only prefix the rule's CRD accepts. Taints
// of ours outside it (left by enforce, or put on by a kubelet flag) are
// removed at once, as observe does, since nothing else would; so is a
// verified=false label, which says the agent re-tainted the node. The
// fleet budget does not apply: nothing of ours is tainted for it to count,
// and the controller acts on every node whose condition is False.

// CheckConditionType is the type of check's own condition in publish mode
// with per-check conditions.
func CheckConditionType(check string) corev1.NodeConditionType {
	return corev1.NodeConditionType(api.CheckConditionPrefix + check)
}

// VerifyingCondition is the condition in publish mode of a node not yet
// verified: which checks and gates fail, and since when.
func VerifyingCondition(failed []string, since time.Time, modes CheckModes) ConditionState {
	m := modes.message("not verified yet: every check and gate must pass")
	m.Failing, m.Since = failed, since
	return ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonVerifying, Message: m.String()}
}

// mode names the mode the agent runs in, for node_ready_mode.
func (c Config) mode() string {
	switch {
	case c.Observe:
		return api.ModeObserve
	case c.Publish:
		return api.ModePublish
	}
	return api.ModeEnforce
}

// publishNodeState is NodeState in publish mode, where the node carries no
// taint of ours to read: a node without the label "true" is being
// verified; a verified one whose condition is False was reported unready.
func (a *Agent) publishNodeState(node *corev1.Node) (verifying, unready bool) {
	if node.Labels[a.cfg.VerifiedLabel] != "true" {
		return true, false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == ConditionType {
			return false, c.Status == corev1.ConditionFalse
		}
	}
	return false, false
}

// nodeState is NodeState, or publishNodeState in publish mode.
func (a *Agent) nodeState(node *corev1.Node) (startup, retainted bool) {
	if a.cfg.Publish {
		return a.publishNodeState(node)
	}
	return NodeState(node, a.cfg.Taints, a.cfg.VerifiedLabel)
}

// ruleOwnable reports whether a NodeReadinessRule can own taint key.
func ruleOwnable(key string) bool { return strings.HasPrefix(key, api.NodeReadinessTaintPrefix) }

// leftovers is the write that removes from node what publish mode keeps
// none of: taints of ours no rule can own, and the label "false". nil when
// there is nothing to remove.
func (a *Agent) leftovers(node *corev1.Node) *Desired {
	t := a.cfg.Taints
	var d Desired
	for _, k := range append([]string{t.Startup.Key, t.Unhealthy.Key}, t.previous()...) {
		if !ruleOwnable(k) && !slices.Contains(d.RemoveKeys, k) && HasAnyTaintKey(node.Spec.Taints, []string{k}) != "" {
			d.RemoveKeys = append(d.RemoveKeys, k)
		}
	}
	d.Unlabel = node.Labels[a.cfg.VerifiedLabel] == "false"
	if len(d.RemoveKeys) == 0 && !d.Unlabel {
		return nil
	}
	return &d
}

// publishStart runs before each step's round in publish mode: it removes
// the leftovers. It reports whether the step may go on.
func (a *Agent) publishStart(ctx context.Context, node *corev1.Node) bool {
	want := a.leftovers(node)
	if want == nil {
		return true
	}
	a.log.Info("publish mode: removing taints of ours that no NodeReadinessRule can own, and verified=false",
		"taint_keys", want.RemoveKeys, "unlabel", want.Unlabel)
	if err := a.patchNode(ctx, node, *want); err != nil {
		a.log.Error("publish mode: cannot remove taints of ours", "error", err)
		return false
	}
	return true
}

// patchNode writes want to node in one guarded patch (NodePatch), once:
// a node that changed meanwhile fails it, and the next step tries again.
func (a *Agent) patchNode(ctx context.Context, node *corev1.Node, want Desired) error {
	patch, err := NodePatch(node, a.cfg.VerifiedLabel, want)
	if err != nil || patch == nil {
		return err
	}
	op := a.operation(node, want)
	if _, err := a.view.patch(ctx, patch); err != nil {
		a.count(op, "error")
		return err
	}
	a.count(op, "success")
	return nil
}

// actPublish is act in publish mode: Decide as enforce would, and write
// the outcome as the condition(s), the label "true" once verified.
func (a *Agent) actPublish(ctx context.Context, round checks.Round, continuous bool, node *corev1.Node) error {
	verifying, unready := a.publishNodeState(node)
	want := Decide(State{
		Passed: round.Passed(), Failures: a.loop.failures, Passes: a.loop.passes,
		StartupTainted: verifying, Retainted: unready, Continuous: continuous,
	}, a.cfg.Thresholds, a.cfg.Taints)
	switch {
	case want.IsRetaint():
		// Where enforce would re-taint: the operator's suspend switch
		// holds it, as the watch saw it and again fresh before the write.
		const cause = "checks keep failing"
		if a.suspended(node, a.suspendState(), cause) || a.suspended(node, a.suspendRead(ctx), cause) {
			return nil
		}
		a.publish(ctx, FailingCondition(round.Failed(), a.loop.failingSince, a.modes), round.Failed())
		a.log.Warn("publish mode: checks failed enough rounds in a row; condition set False", "consecutive_failures", a.loop.failures,
			"condition", string(ConditionType), "failing", round.Failed())
		a.event(node, corev1.EventTypeWarning, api.EventNodeConditionFalse, "Publish",
			"checks failed %d rounds in a row (%v); condition %s set False", a.cfg.Thresholds.Retaint, round.Failed(), ConditionType)
		return nil
	case want.Label == "true":
		if verifying {
			if err := a.patchNode(ctx, node, Desired{Label: "true"}); err != nil {
				return err
			}
			a.loop.everVerified = true
			a.log.Info("publish mode: node verified; condition set True", "condition", string(ConditionType))
			a.event(node, corev1.EventTypeNormal, api.EventNodeVerified, "Publish", "all checks and gates passed; condition %s set True", ConditionType)
		} else if unready {
			a.log.Info("publish mode: checks pass again; condition set True", "passed_rounds", a.loop.passes)
			a.event(node, corev1.EventTypeNormal, api.EventNodeVerified, "Publish", "checks passed %d rounds in a row; condition %s set True", a.cfg.Thresholds.Recover, ConditionType)
		}
		a.publish(ctx, PassingCondition(a.modes), nil)
	case verifying:
		a.publish(ctx, VerifyingCondition(round.Failed(), a.loop.failingSince, a.modes), round.Failed())
	case unready && round.Passed():
		a.publish(ctx, RecoveringCondition(a.loop.passes, a.cfg.Thresholds.Recover, a.modes), nil)
	case unready:
		a.publish(ctx, FailingCondition(round.Failed(), a.loop.failingSince, a.modes), round.Failed())
	}
	// A verified node failing fewer rounds than the threshold keeps its
	// condition True: it is reported unready only when enforce would
	// re-taint it.
	return nil
}

// publishBypass is the step on a bypassed node in publish mode: the
// condition says Bypassed (True), and no taint a rule can own is touched.
func (a *Agent) publishBypass(ctx context.Context, node *corev1.Node) time.Duration {
	a.runGates(ctx, false)
	if !a.publishStart(ctx, node) {
		return a.cfg.InitialBackoff
	}
	a.publish(ctx, BypassedCondition(a.cfg.BypassAnnotation), nil)
	a.health.set(true, true)
	return a.jittered()
}

// publish writes the agent's condition, saying want, and with per-check
// conditions each check's: False for the checks in failing while want is
// False, True for the others. While a node recovers (want Recovering) the
// checks' conditions stay as they are.
func (a *Agent) publish(ctx context.Context, want ConditionState, failing []string) {
	a.metrics.verified.Set(metricsserver.Bool(want.Status == corev1.ConditionTrue))
	node := a.view.node()
	if node == nil {
		return
	}
	conds := map[corev1.NodeConditionType]ConditionState{ConditionType: want}
	if a.cfg.PublishPerCheck && want.Reason != api.ReasonRecovering {
		for _, name := range slices.Concat(a.modes.Continuous, a.modes.Bootstrap) {
			conds[CheckConditionType(name)] = checkCondition(name, want, slices.Contains(failing, name), a.loop.failingSince)
		}
	}
	patch, err := ConditionsPatch(node, conds, a.clock.Now())
	if err != nil || patch == nil {
		return
	}
	a.patchConditions(ctx, patch)
}

// checkCondition is check's own condition while the node's says node.
func checkCondition(check string, node ConditionState, failed bool, since time.Time) ConditionState {
	switch {
	case node.Status == corev1.ConditionFalse && failed:
		m := api.ConditionMessage{Summary: "check " + check + " failing", Since: since}
		return ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonCheckFailing, Message: m.String()}
	case node.Reason == api.ReasonBypassed:
		return ConditionState{Status: corev1.ConditionTrue, Reason: api.ReasonBypassed, Message: node.Message}
	}
	return ConditionState{Status: corev1.ConditionTrue, Reason: api.ReasonCheckPassed, Message: "check " + check + " passes"}
}
