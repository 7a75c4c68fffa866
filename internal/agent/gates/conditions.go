// Package gates holds the agent's gates: checks that wait for the node's
// own readiness (node conditions, the DaemonSets that will run there, CSI
// drivers, extended resources, DRA drivers) before the first untaint, each
// enabled by its own flags, following its objects with watches of its own.
package gates

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// ConditionRequirement is one node condition the conditions gate waits for.
type ConditionRequirement struct {
	// Type is the condition type, such as Ready or one of node-problem-detector's.
	Type corev1.NodeConditionType
	// Status is the status it must have: True, False or Unknown.
	Status corev1.ConditionStatus
}

func (r ConditionRequirement) String() string { return string(r.Type) + "=" + string(r.Status) }

// ParseConditionRequirement parses Type=Status, such as Ready=True or
// NetworkUnavailable=False.
func ParseConditionRequirement(s string) (ConditionRequirement, error) {
	typ, status, ok := strings.Cut(s, "=")
	if !ok || typ == "" {
		return ConditionRequirement{}, fmt.Errorf("condition %q: want Type=Status, such as Ready=True", s)
	}
	if strings.ContainsAny(typ, " ,=") {
		return ConditionRequirement{}, fmt.Errorf("condition %q: type %q is not a condition type", s, typ)
	}
	switch st := corev1.ConditionStatus(status); st {
	case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
		return ConditionRequirement{Type: corev1.NodeConditionType(typ), Status: st}, nil
	}
	return ConditionRequirement{}, fmt.Errorf("condition %q: status must be True, False or Unknown, got %q", s, status)
}

// Conditions is the node-condition gate: it passes when the node's
// conditions have the required statuses. It reads the node the agent already
// watches, so it costs no request.
type Conditions struct {
	// Node returns the node as last seen; nil when it is not known yet.
	Node func() *corev1.Node
	// Required are the conditions to wait for.
	Required []ConditionRequirement
	// AbsentPasses makes a condition the node does not report pass (for a
	// detector that reports only problems); by default it is waited for.
	AbsentPasses bool
}

// Name implements Check.
func (*Conditions) Name() string { return "conditions" }

// Attach implements Gate: the gate reads the node the loop watches.
func (c *Conditions) Attach(h checks.GateHost) { c.Node = h.Node }

// Start implements Gate; the node's own watch is all the gate needs.
func (*Conditions) Start(context.Context, time.Duration) {}

// Stop implements Gate.
func (*Conditions) Stop() {}

// Changed implements Gate: whether the required conditions started or
// stopped holding.
func (c *Conditions) Changed(old, new *corev1.Node) bool {
	return (len(UnmetConditions(old, c.Required, c.AbsentPasses)) == 0) !=
		(len(UnmetConditions(new, c.Required, c.AbsentPasses)) == 0)
}

// Run implements Check.
func (c *Conditions) Run(context.Context) error {
	node := c.Node()
	if node == nil {
		return errors.New("conditions: node not seen yet")
	}
	if unmet := UnmetConditions(node, c.Required, c.AbsentPasses); len(unmet) > 0 {
		return fmt.Errorf("conditions: %s", strings.Join(unmet, ", "))
	}
	return nil
}

// UnmetConditions describes each requirement node does not meet, such as
// "Ready is False, want True" or "NetworkUnavailable not reported".
func UnmetConditions(node *corev1.Node, required []ConditionRequirement, absentPasses bool) []string {
	var unmet []string
	for _, r := range required {
		found := false
		for _, c := range node.Status.Conditions {
			if c.Type != r.Type {
				continue
			}
			found = true
			if c.Status != r.Status {
				msg := fmt.Sprintf("%s is %s, want %s", r.Type, c.Status, r.Status)
				if c.Reason != "" {
					msg += " (" + c.Reason + ")"
				}
				unmet = append(unmet, msg)
			}
			break
		}
		if !found && !absentPasses {
			unmet = append(unmet, fmt.Sprintf("%s not reported, want %s", r.Type, r.Status))
		}
	}
	return unmet
}
