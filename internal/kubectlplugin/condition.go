package kubectlplugin

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// ConditionOf is the agent's KubeNodeReady condition of node, or nil.
func ConditionOf(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if string(node.Status.Conditions[i].Type) == api.ConditionType {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// Round is the agent's latest reported round, read from its condition.
// The agent rewrites the condition only when what it says changes, so this
// is the round at which the outcome last changed; later rounds with the
// same outcome leave it as it is.
type Round struct {
	// Outcome is passed, failed, recovering, bootstrapped, bypassed,
	// rebooted (held after a reboot), would hold, would re-taint, would
	// hold after reboot (observe mode), verifying (publish mode), or the
	// condition's reason when it is none of the agent's.
	Outcome string
	// Detail is the message's summary, or the whole message when it is not
	// in the agent's encoding.
	Detail string
	// Message is the decoded message; zero when it is not in the agent's
	// encoding.
	Message api.ConditionMessage
}

// outcomes words the agent's condition reasons; a reason not here is
// shown as it is.
var outcomes = map[string]string{
	api.ReasonChecksPassed:         "passed",
	api.ReasonChecksFailing:        "failed",
	api.ReasonRecovering:           "recovering",
	api.ReasonBootstrapped:         "bootstrapped",
	api.ReasonBypassed:             "bypassed",
	api.ReasonWouldHold:            "would hold",
	api.ReasonWouldRetaint:         "would re-taint",
	api.ReasonRebooted:             "rebooted",
	api.ReasonWouldHoldAfterReboot: "would hold after reboot",
	api.ReasonVerifying:            "verifying",
}

// RoundOf reads the agent's condition reason and message. It never fails:
// a message in a shape it does not know is kept whole in Detail.
func RoundOf(reason, message string) Round {
	r := Round{Detail: message}
	if m, err := api.ParseConditionMessage(message); err == nil {
		r.Message, r.Detail = m, m.Summary
	}
	r.Outcome = reason
	if o, ok := outcomes[reason]; ok {
		r.Outcome = o
	}
	return r
}
