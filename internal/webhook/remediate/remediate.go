// Package remediate handles nodes that never become usable: a node still
// carrying the agent's startup taint (or its unhealthy taint) longer than a
// deadline is reported, or replaced by deleting its Karpenter NodeClaim (so
// the instance goes too) or else the Node.
//
// It runs on the webhook's leader only, off by default, and is careful in
// the ways an automatic deleter of nodes must be:
//
//   - it never removes capacity that serves workloads: by itself it replaces
//     only nodes that never verified and, on a fresh read, run nothing but
//     DaemonSet and mirror pods; a node that verified once (re-tainted) is
//     reported, or with Config.ReplaceInService replaced only by deleting
//     its NodeClaim, which Karpenter drains honouring PodDisruptionBudgets;
//   - every delete, a first attempt or a retry, passes the same gates on a
//     fresh read of the node from the API server right before it (still
//     unverified, past the deadline, not protected, budget room, breaker
//     closed), and is guarded by the node's UID and resourceVersion;
//   - a node's time counts from when this controller first saw it
//     unverified, on its own clock, and never from before it began leading
//     or the API server last answered again after an outage;
//   - at most Config.MaxReplacing nodes go away at once, counted across the
//     unverified nodes still present that it marked as replacing or that are
//     being deleted (by it or anyone else); a mark counts only for the node
//     incarnation and state it was written for (see Mark);
//   - a circuit breaker per node pool stops replacing while most new nodes
//     of the pool never verify (see Breaker); a new leader rebuilds it from
//     the nodes it finds;
//   - it does nothing while the agents' fleet budget is used up (as many
//     nodes re-tainted as --fleet-budget allows, the candidate's own
//     re-taint included): then the fault is most likely the cluster's, not
//     the nodes';
//   - a NodeClaim is a node's only when the NodeClaim's status names it;
//   - nodes annotated with the deletion-protection annotation are reported,
//     never replaced;
//   - dry-run reports what it would delete.
//
// It watches only nodes whose verified label is not "true" (a label-selected
// informer), so a healthy fleet costs one idle watch.
package remediate

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
)

// Policy says what happens to a node past the unverified deadline.
type Policy string

// Policies.
const (
	PolicyOff     Policy = "off"
	PolicyReport  Policy = "report"
	PolicyReplace Policy = "replace"
)

// ParsePolicy accepts off, report or replace.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyOff, PolicyReport, PolicyReplace:
		return p, nil
	}
	return "", fmt.Errorf("%q is not off, report or replace", s)
}

// ReplacingAnnotation marks a node being replaced (value: a JSON Mark);
// such a node counts against the replacement budget until it is gone or
// leaves the unverified set. Removing it releases the budget.
const ReplacingAnnotation = api.ReplacingAnnotation

// NodeClaims is Karpenter's NodeClaim API.
var NodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// Config tunes the controller.
type Config struct {
	Policy Policy
	// Deadline is how long a node may carry one of Taints.
	Deadline time.Duration
	// MaxReplacing bounds the unverified nodes still present that are marked
	// as replacing or being deleted.
	MaxReplacing budget.Budget
	// FleetBudget is the agents' --fleet-budget: while as many nodes carry
	// VerifiedLabel=false as it allows, nothing is replaced.
	FleetBudget budget.Budget
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// Interval between scans.
	Interval time.Duration
	// StallAfter is the least time a node this controller marked as
	// replacing may stay without going away before its replacement is tried
	// again (through every gate): the delete failed, the replica that marked
	// it stopped, or Karpenter has not acted. The wait is
	// max(2×Interval, StallAfter); the webhook's --remediation-stall-after,
	// 30 s by default.
	StallAfter time.Duration
	// Clock is the time every rule reads: the deadline, the fair chance, the
	// breaker's judgements, a stalled replacement's retry, the scans'
	// interval. nil is the real clock; tests step a fake one.
	Clock clock.WithTicker
	// StartupTaints are the keys of the agent's startup taint: the
	// configured one first, then the previous keys the agent still removes
	// (every preset's, the user's). A node created with any of them is new.
	StartupTaints []string
	// UnhealthyTaints are the keys of the agent's unhealthy taint, the
	// configured one first, then the previous ones.
	UnhealthyTaints []string
	// VerifiedLabel is the agent's label: "true" verified, "false" re-tainted.
	VerifiedLabel string
	// AgentSkipAnnotation is the agent's bypass: a node carrying it set to
	// "true" is vouched for by an operator: never replaced, and never counted
	// against the fleet budget whatever its label says (its agent may be down).
	AgentSkipAnnotation string
	// ReplacingAnnotation marks a node this controller replaced (value: when).
	ReplacingAnnotation string
	// ProtectAnnotation set to "true" keeps a node from being replaced.
	ProtectAnnotation string
	// NodeClaims makes a replacement delete the node's Karpenter NodeClaim
	// when the API exists and one owns the node.
	NodeClaims bool
	// Breaker stops replacing, per node pool, while most new nodes of the
	// pool never verify.
	Breaker Breaker
	// PoolLabel is the node label whose value names a node's pool for the
	// circuit breaker; empty: the first of PoolLabels a node carries.
	PoolLabel string
	// ReplaceInService lets a node that verified once and was re-tainted be
	// replaced too, but only by deleting its Karpenter NodeClaim (Karpenter
	// drains it through the Eviction API, honouring PodDisruptionBudgets);
	// without a NodeClaim it is only reported. Off: such a node is only
	// reported.
	ReplaceInService bool
	// Namespace and RetaintLease locate the agents' re-taint Lease: while an
	// agent was refused a re-taint by the fleet budget within Deadline (its
	// api.FleetBudgetRefusedAnnotation changed), nothing is replaced. An
	// empty RetaintLease reads none.
	Namespace, RetaintLease string
	// TotalNodes counts every node (for percentages).
	TotalNodes func() int
	// Recorder records Events on Nodes; nil records none.
	Recorder events.EventRecorder
	// Suspend is the operator's suspend switch: while it is on, or cannot
	// be read, nothing is replaced (suspend.go). nil: never suspended.
	Suspend Switch
}

// state returns which of the agent's taint keys n carries when it is
// unverified (the verified label is not "true"): a startup key first. A
// previous key counts like the configured one: the agent removes it when
// the node verifies, so a node carrying it is not stranded out of sight. A node an
// operator bypassed (AgentSkipAnnotation) is vouched for, not unverified:
// its agent removes the taints, and if that agent is down it is still not
// this controller's to replace.
func (c *Controller) state(n *corev1.Node) (taint string, unverified bool) {
	if n.Labels[c.cfg.VerifiedLabel] == "true" || c.bypassed(n) {
		return "", false
	}
	for _, key := range slices.Concat(c.cfg.StartupTaints, c.cfg.UnhealthyTaints) {
		if key != "" && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key }) {
			return key, true
		}
	}
	return "", false
}

// neverVerified reports whether n is a new node that has not verified yet:
// it carries a startup key and the agent never labelled it. Any other
// unverified node verified once and is in service: its re-taint evicted
// nothing, so it runs real workloads.
func (c *Controller) neverVerified(n *corev1.Node) bool {
	taint, unverified := c.state(n)
	return unverified && slices.Contains(c.cfg.StartupTaints, taint) && n.Labels[c.cfg.VerifiedLabel] == ""
}

// bypassed reports whether an operator set the agent's bypass annotation.
func (c *Controller) bypassed(n *corev1.Node) bool {
	return c.cfg.AgentSkipAnnotation != "" && n.Annotations[c.cfg.AgentSkipAnnotation] == "true"
}
