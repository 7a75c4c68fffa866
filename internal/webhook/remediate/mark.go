package remediate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
)

// markAuthor names this controller in the marks it writes; a mark without it
// (written by hand, by another tool, or by a version before marks said who
// wrote them) is not ours and is ignored.
const markAuthor = "kube-node-ready/remediation"

// Mark is the value of the replacing annotation: who judged which
// incarnation of the node (UID) in which state (taint and verified label),
// and when. A mark is honoured only while all of it still holds, so a mark
// left from an earlier attempt, an earlier incarnation of the name or an
// earlier unverified episode can never stand in for the gates.
type Mark struct {
	// By is markAuthor.
	By string `json:"by"`
	// UID is the node's UID when it was judged.
	UID types.UID `json:"uid"`
	// Taint is which of the agent's taints it carried.
	Taint string `json:"taint"`
	// Verified is the value of the verified label ("" when absent).
	Verified string `json:"verified"`
	// At is when it was marked, on this controller's clock (information
	// only: nothing is decided from it but when to retry).
	At time.Time `json:"at"`
}

// newMark is the mark for n judged in state (taint) at now.
func (c *Controller) newMark(n *corev1.Node, taint string, now time.Time) Mark {
	return Mark{By: markAuthor, UID: n.UID, Taint: taint, Verified: n.Labels[c.cfg.VerifiedLabel], At: now.UTC().Truncate(time.Second)}
}

// validMark returns n's mark when this controller wrote it for n's current
// incarnation and state; ok is false for no mark or one to ignore.
func (c *Controller) validMark(n *corev1.Node) (m Mark, ok bool) {
	raw, present := n.Annotations[c.cfg.ReplacingAnnotation]
	if !present || json.Unmarshal([]byte(raw), &m) != nil {
		return Mark{}, false
	}
	taint, unverified := c.state(n)
	if m.By != markAuthor || m.UID != n.UID || !unverified || m.Taint != taint || m.Verified != n.Labels[c.cfg.VerifiedLabel] {
		return Mark{}, false
	}
	return m, true
}

// mark writes m on n, guarded by n's UID and resourceVersion (the fresh read
// the gates passed on): a node that changed since gets a conflict and is
// judged again. It returns the node as marked, whose resourceVersion guards
// the delete.
func (c *Controller) mark(ctx context.Context, n *corev1.Node, m Mark) (*corev1.Node, error) {
	value, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode mark: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": n.UID, "resourceVersion": n.ResourceVersion,
		"annotations": map[string]string{c.cfg.ReplacingAnnotation: string(value)},
	}})
	if err != nil {
		return nil, fmt.Errorf("encode mark patch: %w", err)
	}
	marked, err := c.client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerWebhook})
	if err != nil {
		return nil, fmt.Errorf("mark node %s: %w", n.Name, err)
	}
	return marked, nil
}

// unmark removes the replacing annotation from n if it still holds the value
// n was read with (a JSON patch test): a mark written since by another
// replica for a newer judgement stays.
func (c *Controller) unmark(ctx context.Context, n *corev1.Node) error {
	value, ok := n.Annotations[c.cfg.ReplacingAnnotation]
	if !ok {
		return nil
	}
	path := "/metadata/annotations/" + jsonpatch.EscapePointer(c.cfg.ReplacingAnnotation)
	patch, err := jsonpatch.Marshal(jsonpatch.Test("/metadata/uid", string(n.UID)), jsonpatch.Test(path, value), jsonpatch.Remove(path))
	if err != nil {
		return fmt.Errorf("encode unmark patch: %w", err)
	}
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, n.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerWebhook}); err != nil {
		return fmt.Errorf("unmark node %s: %w", n.Name, err)
	}
	return nil
}

// removeMark removes the replacing annotation from n (if it still holds the
// value n was read with), logging why.
func (c *Controller) removeMark(ctx context.Context, n *corev1.Node, why string) {
	value, ok := n.Annotations[c.cfg.ReplacingAnnotation]
	if !ok {
		return
	}
	if err := c.unmark(ctx, n); err != nil {
		c.log.Warn("cannot remove a replacing mark", "node", n.Name, "why", why, "error", err)
		c.actions.WithLabelValues("unmark", "error").Inc()
		return
	}
	c.log.Info("removed a replacing mark", "node", n.Name, "why", why, "annotation", c.cfg.ReplacingAnnotation, "value", value)
	c.actions.WithLabelValues("unmark", "success").Inc()
}
