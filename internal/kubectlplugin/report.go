package kubectlplugin

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// ListAPIVersion and ListKind head the -o json|yaml output. Fields are only
// ever added to it, so scripts can rely on the ones there.
const (
	ListAPIVersion = "kubectl-node-ready/v1"
	ListKind       = "NodeReadyList"
)

// List is the -o json|yaml output of status and cleanup status.
type List struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Items      []NodeReport `json:"items"`
}

// NodeReport is what kube-node-ready says about one node.
type NodeReport struct {
	// Name is the node's name.
	Name string `json:"name"`
	// CreationTimestamp is when the node was created (AGE).
	CreationTimestamp metav1.Time `json:"creationTimestamp"`
	// Verified is the verified label: true, false, or unknown when absent
	// or neither.
	Verified string `json:"verified"`
	// Taints are ours on the node: unverified, unhealthy.
	Taints []string `json:"taints"`
	// TaintKeys are the keys of those taints on the node, startup keys
	// first.
	TaintKeys []string `json:"taintKeys"`
	// Failing are the failing checks the agent's condition names.
	Failing []string `json:"failing"`
	// Condition is the agent's KubeNodeReady condition, null when absent.
	Condition *Condition `json:"condition"`
	// Bypass is whether the skip-verification annotation is true.
	Bypass bool `json:"bypass"`
	// Finalizer is whether the node carries the cleanup finalizer.
	Finalizer bool `json:"finalizer"`
	// Cleanup is where the node's cleanup stands.
	Cleanup Cleanup `json:"cleanup"`
	// Would is, in observe mode, the taint of ours enforce would have on
	// the node now; null when none (and always in enforce mode).
	Would *Would `json:"would,omitempty"`
}

// Would is a taint enforce would have on a node in observe mode.
type Would struct {
	// Taint is unverified (held new) or unhealthy (re-tainted).
	Taint string `json:"taint"`
	// Since is when enforce would have put it on: the node's creation, or
	// the round that would have re-tainted it.
	Since metav1.Time `json:"since"`
}

// Condition is the agent's condition as reported.
type Condition struct {
	Status             string      `json:"status"`
	Reason             string      `json:"reason"`
	Message            string      `json:"message"`
	LastHeartbeatTime  metav1.Time `json:"lastHeartbeatTime"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// Report reads what kube-node-ready left on node; keys are the agent's
// taint keys.
func Report(node *corev1.Node, keys TaintKeys) NodeReport {
	r := NodeReport{
		Name:              node.Name,
		CreationTimestamp: node.CreationTimestamp,
		Verified:          "unknown",
		Failing:           []string{},
		Bypass:            node.Annotations[api.SkipVerificationAnnotation] == "true",
		Finalizer:         slices.Contains(node.Finalizers, api.Finalizer),
		Cleanup:           CleanupOf(node),
	}
	r.Taints, r.TaintKeys = keys.on(node)
	if v := node.Labels[api.VerifiedLabel]; v == "true" || v == "false" {
		r.Verified = v
	}
	if c := ConditionOf(node); c != nil {
		r.Condition = &Condition{
			Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: c.LastTransitionTime,
		}
		round := RoundOf(c.Reason, c.Message)
		if round.Message.Failing != nil {
			r.Failing = round.Message.Failing
		}
		switch c.Reason {
		case api.ReasonWouldHold, api.ReasonWouldHoldAfterReboot:
			r.Would = &Would{Taint: taintUnverified, Since: metav1.NewTime(round.Message.Since)}
		case api.ReasonWouldRetaint:
			r.Would = &Would{Taint: taintUnhealthy, Since: metav1.NewTime(round.Message.Since)}
		}
	}
	return r
}

// Reports reads every node, sorted by name; keys are the agent's taint
// keys.
func Reports(nodes []corev1.Node, keys TaintKeys) []NodeReport {
	out := make([]NodeReport, 0, len(nodes))
	for i := range nodes {
		out = append(out, Report(&nodes[i], keys))
	}
	slices.SortFunc(out, func(a, b NodeReport) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// InCleanup keeps the reports of nodes being deleted that still carry the
// finalizer: the ones whose cleanup is pending.
func InCleanup(reports []NodeReport) []NodeReport {
	out := []NodeReport{}
	for _, r := range reports {
		if r.Cleanup.State == CleanupDeleting && r.Finalizer {
			out = append(out, r)
		}
	}
	return out
}
