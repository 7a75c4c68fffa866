package kubectlplugin

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ConditionOf is the agent's KubeNodeReady condition of node, or nil.
func ConditionOf(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if string(node.Status.Conditions[i].Type) == ConditionType {
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
	// Outcome is passed, failed, recovering, bootstrapped, bypassed, or
	// the condition's reason when it is none of the agent's.
	Outcome string
	// Detail is the message without the check lists.
	Detail string
	// Failing are the failing checks when the outcome is failed.
	Failing []string
	// Since is when the failing streak began, when the message says.
	Since time.Time
	// Continuous and Bootstrap are the agent's check lists, as it wrote
	// them ("none" when empty); empty when the message has none.
	Continuous, Bootstrap string
}

// RoundOf reads the agent's condition reason and message. It never fails:
// a message in a shape it does not know is kept whole in Detail.
func RoundOf(reason, message string) Round {
	r := Round{Detail: message}
	if i := strings.LastIndex(message, "; continuous: "); i >= 0 {
		modes := message[i+len("; continuous: "):]
		if cont, boot, ok := strings.Cut(modes, "; bootstrap: "); ok {
			r.Detail, r.Continuous, r.Bootstrap = message[:i], cont, boot
		}
	}
	switch reason {
	case ReasonChecksPassed:
		r.Outcome = "passed"
	case ReasonChecksFailing:
		r.Outcome = "failed"
		r.Failing, r.Since = parseFailing(r.Detail)
	case ReasonRecovering:
		r.Outcome = "recovering"
	case ReasonBootstrapped:
		r.Outcome = "bootstrapped"
	case ReasonBypassed:
		r.Outcome = "bypassed"
	default:
		r.Outcome = reason
	}
	return r
}

// parseFailing reads "failing: dns,api (since 2026-11-21T14:01:02Z)".
func parseFailing(detail string) ([]string, time.Time) {
	rest, ok := strings.CutPrefix(detail, "failing: ")
	if !ok {
		return nil, time.Time{}
	}
	list, since, _ := strings.Cut(rest, " (since ")
	var failing []string
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			failing = append(failing, name)
		}
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSuffix(since, ")"))
	if err != nil {
		t = time.Time{}
	}
	return failing, t
}
