package agent

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// ConditionType is the agent's own condition on its node: why the node is
// (un)verified, for `kubectl describe node`.
const ConditionType = corev1.NodeConditionType(api.ConditionType)

// ConditionState is what the condition says, without its timestamps.
type ConditionState struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// CheckModes names the continuous and bootstrap checks for the message.
type CheckModes struct {
	Continuous, Bootstrap []string
}

// message is a condition message carrying the check lists.
func (m CheckModes) message(summary string) api.ConditionMessage {
	return api.ConditionMessage{Summary: summary, HasModes: true, Continuous: m.Continuous, Bootstrap: m.Bootstrap}
}

// FailingCondition is the condition while checks fail: which, and since when
// (the first failed round of the streak), so it changes only when they do.
func FailingCondition(failed []string, since time.Time, modes CheckModes) ConditionState {
	m := modes.message("checks failing")
	m.Failing, m.Since = failed, since
	return ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonChecksFailing, Message: m.String()}
}

// PassingCondition is the condition after a passed round.
func PassingCondition(modes CheckModes) ConditionState {
	return ConditionState{Status: corev1.ConditionTrue, Reason: api.ReasonChecksPassed, Message: modes.message("all checks pass").String()}
}

// RecoveringCondition is the condition of a re-tainted node whose checks
// pass again, until enough rounds in a row have passed to untaint it.
func RecoveringCondition(passes, needed int, modes CheckModes) ConditionState {
	m := modes.message("checks pass again, not yet enough rounds in a row to untaint")
	m.Passed, m.Needed = passes, needed
	return ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonRecovering, Message: m.String()}
}

// BootstrappedCondition is a bootstrap-only agent's condition once the node
// is verified: nothing runs any more.
func BootstrappedCondition(modes CheckModes) ConditionState {
	return ConditionState{Status: corev1.ConditionTrue, Reason: api.ReasonBootstrapped,
		Message: modes.message("verified, bootstrap-only: no further checks run on this node").String()}
}

// BypassedCondition is the condition while the bypass annotation is set.
func BypassedCondition(annotation string) ConditionState {
	m := api.ConditionMessage{Summary: "checks bypassed", Annotation: annotation + "=true"}
	return ConditionState{Status: corev1.ConditionTrue, Reason: api.ReasonBypassed, Message: m.String()}
}

// ConditionPatch is the strategic merge patch of the node's status that
// sets want, or nil when the node's condition already says it. The
// transition time moves only when the status changes.
func ConditionPatch(node *corev1.Node, want ConditionState, now time.Time) ([]byte, error) {
	return ConditionsPatch(node, map[corev1.NodeConditionType]ConditionState{ConditionType: want}, now)
}

// ConditionsPatch is ConditionPatch for several conditions of the agent's
// (publish mode's per-check ones): one patch that sets those of want that
// the node does not say already, or nil when it says them all.
func ConditionsPatch(node *corev1.Node, want map[corev1.NodeConditionType]ConditionState, now time.Time) ([]byte, error) {
	var conds []corev1.NodeCondition
	for _, typ := range slices.Sorted(maps.Keys(want)) {
		if c, changed := conditionFor(node, typ, want[typ], now); changed {
			conds = append(conds, c)
		}
	}
	if len(conds) == 0 {
		return nil, nil
	}
	return json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
}

// conditionFor is the condition of type typ saying want, and whether the
// node says otherwise now.
func conditionFor(node *corev1.Node, typ corev1.NodeConditionType, want ConditionState, now time.Time) (corev1.NodeCondition, bool) {
	transition := metav1.NewTime(now)
	for _, c := range node.Status.Conditions {
		if c.Type != typ {
			continue
		}
		if c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
			return c, false
		}
		if c.Status == want.Status {
			transition = c.LastTransitionTime
		}
	}
	return corev1.NodeCondition{
		Type: typ, Status: want.Status, Reason: want.Reason, Message: want.Message,
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: transition,
	}, true
}
