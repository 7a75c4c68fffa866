package agent

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
)

// Taints are the two taints the agent manages on its node.
type Taints struct {
	// Startup is the taint a node is created with; the agent only ever removes it.
	Startup corev1.Taint
	// Unhealthy is the taint a verified node gets when its checks keep
	// failing. When it equals Startup the agent re-taints with the startup
	// taint (the behaviour before the unhealthy taint existed).
	Unhealthy corev1.Taint
	// PreviousStartup are keys of startup taints earlier configurations
	// used (every preset's, and the user's --previous-taint-keys): a node
	// created with one is verified like one carrying Startup, and the key
	// goes with it. The agent never adds them.
	PreviousStartup []string
	// PreviousUnhealthy are keys of unhealthy taints earlier configurations
	// used: a node carrying one recovers like one carrying Unhealthy.
	PreviousUnhealthy []string
}

// startupOn reports whether taints hold the startup taint or a previous
// startup key.
func (t Taints) startupOn(taints []corev1.Taint) bool {
	return HasTaint(taints, t.Startup) || HasAnyTaintKey(taints, t.PreviousStartup) != ""
}

// unhealthyOn reports whether taints hold the unhealthy taint (when it is
// not the startup taint) or a previous unhealthy key.
func (t Taints) unhealthyOn(taints []corev1.Taint) bool {
	return (t.Unhealthy != t.Startup && HasTaint(taints, t.Unhealthy)) || HasAnyTaintKey(taints, t.PreviousUnhealthy) != ""
}

// previous lists every previous key, startup then unhealthy.
func (t Taints) previous() []string {
	return append(slices.Clone(t.PreviousStartup), t.PreviousUnhealthy...)
}

// State is what the agent knows about its node and its last rounds: the
// input of Decide.
type State struct {
	// Bypass is true while the bypass annotation is set.
	Bypass bool
	// Passed is the outcome of the last round.
	Passed bool
	// Failures counts consecutive failed rounds the agent could act on.
	Failures int
	// Passes counts consecutive passed rounds.
	Passes int
	// StartupTainted is true while the node carries the startup taint and
	// was never re-tainted: it is still being verified for the first time.
	StartupTainted bool
	// Retainted is true while the node is re-tainted (verified label
	// "false"), whichever taint that used.
	Retainted bool
	// Continuous is true when the round ran the continuous checks alone
	// (BootstrapRound was false). Only such rounds can re-taint: the
	// bootstrap checks and gates hold the startup taint and nothing else.
	// The zero value is the safe one: a caller that does not say never
	// re-taints.
	Continuous bool
}

// Thresholds are the streak lengths Decide acts on.
type Thresholds struct {
	// Retaint is how many consecutive failed rounds re-taint a verified node.
	Retaint int
	// Recover is how many consecutive passed rounds untaint a re-tainted node.
	Recover int
}

// Desired is the change the agent wants on its node after a round.
type Desired struct {
	// Add is the taint to put on the node, if any.
	Add *corev1.Taint
	// Remove are taints to take off the node where present.
	Remove []corev1.Taint
	// RemoveKeys are keys of taints to take off the node where present,
	// whatever their effect: the previous keys.
	RemoveKeys []string
	// Label is the value of the verified label; empty leaves it as it is.
	Label string
	// Unlabel removes a verified label that says "false". A bypassed node
	// is not re-tainted: left at "false" it would hold a slot of the fleet
	// budget (and count against remediation's) for as long as the bypass
	// lasts, suppressing every other re-taint in a small cluster.
	Unlabel bool
	// Continuous marks a change decided on a round of the continuous
	// checks alone. It is never written to a node that, by the time of the
	// write, needs the bootstrap set (BootstrapRound): those checks said
	// nothing about a node being verified for the first time.
	Continuous bool
	// Reboot marks the hold of a verified node that rebooted (Add is the
	// startup taint, Label "false"): it passes the gates of a re-taint and
	// is written only while the node, as written, still runs under another
	// boot ID than it was verified under (reboot.go).
	Reboot bool
}

// IsRetaint reports whether want re-taints the node: the one change that
// needs the fleet budget.
func (d Desired) IsRetaint() bool { return d.Add != nil }

// Decide turns what the agent knows into the change it wants. It is pure;
// the caller checks the fleet budget before a re-taint.
func Decide(s State, th Thresholds, t Taints) Desired {
	clear := []corev1.Taint{t.Startup}
	if t.Unhealthy != t.Startup {
		clear = append(clear, t.Unhealthy)
	}
	switch {
	case s.Bypass:
		// The operator vouches for the node: untaint, never re-taint, and
		// free its slot of the fleet budget.
		return Desired{Remove: clear, RemoveKeys: t.previous(), Unlabel: true}
	case s.Passed && s.Retainted && s.Passes < th.Recover:
		// A re-tainted node must pass several rounds before it is trusted again.
		return Desired{}
	case s.Passed:
		// On a live node without our label (the chart installed into a
		// running cluster) this only labels it: it has no taint of ours.
		return Desired{Remove: clear, RemoveKeys: t.previous(), Label: "true", Continuous: s.Continuous}
	case s.Continuous && !s.StartupTainted && !s.Retainted && s.Failures >= th.Retaint:
		unhealthy := t.Unhealthy
		return Desired{Add: &unhealthy, Label: "false", Continuous: true}
	default:
		// Too few failures to act on, a round of the bootstrap set, still
		// verifying for the first time, or already re-tainted: leave the
		// node as it is.
		return Desired{}
	}
}

// BootstrapRound reports whether a round on node runs the bootstrap set
// (every check and gate) rather than the continuous checks alone. Only a
// node being verified for the first time needs it: one that carries the
// startup taint and neither our label nor an unhealthy taint; and one held
// after a reboot (RebootHeld), verified again. A node in
// service is judged by the continuous checks, the only ones that can
// re-taint it: one verified once (label "true"), one re-tainted, and one
// with no taint or label of ours at all, which is what every node of a
// running cluster is when the chart is installed, after a rename of the
// label, or after the bypass annotation is removed. An agent with no
// continuous check (bootstrapOnly) runs the bootstrap set on a re-tainted
// node, as nothing else would ever untaint it.
func BootstrapRound(node *corev1.Node, t Taints, labelKey string, bootstrapOnly bool) bool {
	if node.Labels[labelKey] == "true" {
		return false
	}
	startupTainted, retainted := NodeState(node, t, labelKey)
	if retainted {
		return bootstrapOnly
	}
	return startupTainted
}

// NodeState derives the node part of State from the node as last seen. A
// previous key counts like the configured taint of its kind, so a node
// created, or re-tainted, before the keys changed is never stranded. A node
// held after a reboot (RebootHeld) is being verified again, like a new
// one: startupTainted, not retainted.
func NodeState(node *corev1.Node, t Taints, labelKey string) (startupTainted, retainted bool) {
	if RebootHeld(node, t, labelKey) {
		return true, false
	}
	retainted = node.Labels[labelKey] == "false" || t.unhealthyOn(node.Spec.Taints)
	return t.startupOn(node.Spec.Taints) && !retainted, retainted
}

// HasTaint reports whether taints hold one with t's key and effect.
func HasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return indexTaint(taints, t) >= 0
}

func indexTaint(taints []corev1.Taint, t corev1.Taint) int {
	for i := range taints {
		if taints[i].Key == t.Key && taints[i].Effect == t.Effect {
			return i
		}
	}
	return -1
}

// HasAnyTaintKey returns the first key of keys that node carries, or "".
func HasAnyTaintKey(taints []corev1.Taint, keys []string) string {
	for _, t := range taints {
		for _, k := range keys {
			if t.Key == k {
				return t.Key
			}
		}
	}
	return ""
}

// NodePatch returns the JSON patch that applies want to node, or nil when the
// node already matches. A taint change is guarded by a test of the whole
// taint list the decision was made from (or, when the node has no taints, of
// its resourceVersion), so a concurrent edit fails the patch instead of being
// overwritten; the caller re-reads the node and tries again. A re-taint, and
// a label written without a taint change, are guarded by the
// resourceVersion: any change to the node fails them.
func NodePatch(node *corev1.Node, labelKey string, want Desired) ([]byte, error) {
	taints := slices.Clone(node.Spec.Taints)
	for _, t := range want.Remove {
		if i := indexTaint(taints, t); i >= 0 {
			taints = slices.Delete(taints, i, i+1)
		}
	}
	if len(want.RemoveKeys) > 0 {
		taints = slices.DeleteFunc(taints, func(t corev1.Taint) bool { return slices.Contains(want.RemoveKeys, t.Key) })
	}
	if want.Add != nil && indexTaint(taints, *want.Add) < 0 {
		taints = append(taints, *want.Add)
	}
	var ops []jsonpatch.Op
	taintsChange := !slices.Equal(taints, node.Spec.Taints)
	if taintsChange {
		if len(node.Spec.Taints) == 0 {
			ops = append(ops,
				jsonpatch.Test("/metadata/resourceVersion", node.ResourceVersion),
				jsonpatch.Add("/spec/taints", taints))
		} else {
			// Replacing the list under a test of the old one is one guarded
			// step whatever was removed or added.
			ops = append(ops,
				jsonpatch.Test("/spec/taints", node.Spec.Taints),
				jsonpatch.Replace("/spec/taints", nonNil(taints)))
		}
	}
	if want.Unlabel && node.Labels[labelKey] == "false" {
		path := "/metadata/labels/" + jsonpatch.EscapePointer(labelKey)
		ops = append(ops, jsonpatch.Test(path, "false"), jsonpatch.Remove(path))
	}
	labelChange := want.Label != "" && node.Labels[labelKey] != want.Label
	if labelChange {
		if len(node.Labels) == 0 { // an empty map is absent in JSON
			ops = append(ops, jsonpatch.Add("/metadata/labels", map[string]string{labelKey: want.Label}))
		} else {
			ops = append(ops, jsonpatch.Add("/metadata/labels/"+jsonpatch.EscapePointer(labelKey), want.Label))
		}
	}
	if len(ops) == 0 {
		return nil, nil
	}
	// A re-taint applies only to the version of the node its gates were
	// checked on (no bypass annotation since, say), and so does a label
	// written without a taint change (a live node labelled verified: a
	// node that gained the startup taint since must not be marked verified
	// unchecked). Any change fails the patch, and the caller checks again.
	// (A taint change on a node without taints is pinned already.)
	if (want.Add != nil && len(node.Spec.Taints) > 0) || (labelChange && !taintsChange) {
		ops = append([]jsonpatch.Op{jsonpatch.Test("/metadata/resourceVersion", node.ResourceVersion)}, ops...)
	}
	return jsonpatch.Marshal(ops...)
}

// nonNil keeps an emptied taint list an empty JSON array rather than null.
func nonNil(t []corev1.Taint) []corev1.Taint {
	if t == nil {
		return []corev1.Taint{}
	}
	return t
}

// taintString formats a taint as key=value:Effect, as flags take it.
func taintString(t corev1.Taint) string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	return s + ":" + string(t.Effect)
}
