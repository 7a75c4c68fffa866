package agent

import (
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Desired is the state of its own node the agent wants after a round.
type Desired struct {
	// Taint says whether the startup taint should be on the node.
	Taint bool
	// Label is the value of the verified label; empty leaves it as it is.
	Label string
}

// Decide turns what the agent knows into the node state it wants. It is pure:
// passed is the last round's outcome, failures the consecutive failed rounds
// including it, tainted whether the node carries the startup taint now.
// Re-tainting a node that is not yet tainted also needs the fleet budget,
// which the caller checks (Desired.Taint && !tainted).
func Decide(bypass, passed bool, failures, threshold int, tainted bool) Desired {
	switch {
	case bypass:
		// The operator vouches for the node: untaint, and never re-taint.
		return Desired{Taint: false}
	case passed:
		return Desired{Taint: false, Label: "true"}
	case failures >= threshold:
		return Desired{Taint: true, Label: "false"}
	default:
		// Too few failures to act on: leave the node as it is.
		return Desired{Taint: tainted}
	}
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

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// NodePatch returns the JSON patch that brings node to want, or nil when the
// node already matches. The taint change is guarded by a test of the whole
// taint list the decision was made from (or, when the node has no taints, of
// its resourceVersion), so a concurrent edit fails the patch instead of being
// overwritten; the caller re-reads the node and tries again.
func NodePatch(node *corev1.Node, taint corev1.Taint, labelKey string, want Desired) ([]byte, error) {
	var ops []patchOp
	taints := node.Spec.Taints
	i := indexTaint(taints, taint)
	switch {
	case want.Taint && i < 0 && len(taints) == 0:
		ops = append(ops,
			patchOp{Op: "test", Path: "/metadata/resourceVersion", Value: node.ResourceVersion},
			patchOp{Op: "add", Path: "/spec/taints", Value: []corev1.Taint{taint}})
	case want.Taint && i < 0:
		ops = append(ops,
			patchOp{Op: "test", Path: "/spec/taints", Value: taints},
			patchOp{Op: "add", Path: "/spec/taints/-", Value: taint})
	case !want.Taint && i >= 0:
		ops = append(ops,
			patchOp{Op: "test", Path: "/spec/taints", Value: taints},
			patchOp{Op: "remove", Path: "/spec/taints/" + strconv.Itoa(i)})
	}
	if want.Label != "" && node.Labels[labelKey] != want.Label {
		if len(node.Labels) == 0 { // an empty map is absent in JSON
			ops = append(ops, patchOp{Op: "add", Path: "/metadata/labels", Value: map[string]string{labelKey: want.Label}})
		} else {
			ops = append(ops, patchOp{Op: "add", Path: "/metadata/labels/" + escapePointer(labelKey), Value: want.Label})
		}
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// escapePointer escapes a map key for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
