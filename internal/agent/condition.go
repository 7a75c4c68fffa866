package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionType is the agent's own condition on its node: why the node is
// (un)verified, for `kubectl describe node`.
const ConditionType corev1.NodeConditionType = "KubeNodeReady"

// Condition reasons.
const (
	ReasonChecksPassed  = "ChecksPassed"
	ReasonChecksFailing = "ChecksFailing"
	ReasonRecovering    = "Recovering"
	ReasonBootstrapped  = "Bootstrapped"
	ReasonBypassed      = "Bypassed"
)

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

func (m CheckModes) String() string {
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ",")
	}
	return "continuous: " + list(m.Continuous) + "; bootstrap: " + list(m.Bootstrap)
}

// FailingCondition is the condition while checks fail: which, and since when
// (the first failed round of the streak), so it changes only when they do.
func FailingCondition(failed []string, since time.Time, modes CheckModes) ConditionState {
	return ConditionState{
		Status: corev1.ConditionFalse, Reason: ReasonChecksFailing,
		Message: fmt.Sprintf("failing: %s (since %s); %s", strings.Join(failed, ","), since.UTC().Format(time.RFC3339), modes),
	}
}

// PassingCondition is the condition after a passed round.
func PassingCondition(modes CheckModes) ConditionState {
	return ConditionState{Status: corev1.ConditionTrue, Reason: ReasonChecksPassed, Message: "all checks pass; " + modes.String()}
}

// RecoveringCondition is the condition of a re-tainted node whose checks
// pass again, until enough rounds in a row have passed to untaint it.
func RecoveringCondition(passes, needed int, modes CheckModes) ConditionState {
	return ConditionState{Status: corev1.ConditionFalse, Reason: ReasonRecovering,
		Message: fmt.Sprintf("checks pass again: %d of %d passed rounds needed to untaint; %s", passes, needed, modes)}
}

// BootstrappedCondition is a bootstrap-only agent's condition once the node
// is verified: nothing runs any more.
func BootstrappedCondition(modes CheckModes) ConditionState {
	return ConditionState{Status: corev1.ConditionTrue, Reason: ReasonBootstrapped,
		Message: "verified; bootstrap-only: no further checks run on this node; " + modes.String()}
}

// BypassedCondition is the condition while the bypass annotation is set.
func BypassedCondition(annotation string) ConditionState {
	return ConditionState{Status: corev1.ConditionTrue, Reason: ReasonBypassed,
		Message: "checks bypassed: annotation " + annotation + "=true"}
}

// ConditionPatch is the strategic merge patch of the node's status that
// sets want, or nil when the node's condition already says it. The
// transition time moves only when the status changes.
func ConditionPatch(node *corev1.Node, want ConditionState, now time.Time) ([]byte, error) {
	transition := metav1.NewTime(now)
	for _, c := range node.Status.Conditions {
		if c.Type != ConditionType {
			continue
		}
		if c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
			return nil, nil
		}
		if c.Status == want.Status {
			transition = c.LastTransitionTime
		}
	}
	cond := corev1.NodeCondition{
		Type: ConditionType, Status: want.Status, Reason: want.Reason, Message: want.Message,
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: transition,
	}
	return json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
}
