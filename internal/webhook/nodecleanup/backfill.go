package nodecleanup

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
)

// syncBackfill brings one Node to the desired state: not being deleted →
// carries the finalizer. (Nodes being deleted are syncCleanup's business.)
func (c *Controller) syncBackfill(ctx context.Context, name string, requeues int) error {
	m, err := c.cached(name)
	if m == nil || err != nil {
		return err
	}
	if !NeedsFinalizer(m, c.cfg.Finalizer, c.cfg.Legacy...) {
		return nil
	}
	if c.cfg.BackfillAllowed != nil && !c.cfg.BackfillAllowed(ctx) {
		c.log.Debug("back-fill paused: the webhook configuration is absent", "node", name)
		return nil
	}
	patch, err := AddFinalizerPatch(m.Finalizers, c.cfg.Finalizer, c.cfg.Legacy...)
	if err != nil {
		return err
	}
	_, err = c.client.Resource(NodesResource).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerWebhook})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		c.patches.WithLabelValues("error").Inc()
		c.log.Warn("finalizer back-fill failed; retrying", "node", name, "error", err, "retries", requeues)
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	c.patches.WithLabelValues("success").Inc()
	if old := c.legacyOn(m); len(old) > 0 {
		c.log.Info("legacy finalizer replaced on node", "node", name, "finalizer", c.cfg.Finalizer, "legacy", old)
		return nil
	}
	c.log.Info("finalizer added to node", "node", name, "finalizer", c.cfg.Finalizer)
	return nil
}

// legacyOn lists the legacy names of ours that m carries.
func (c *Controller) legacyOn(m *metav1.PartialObjectMetadata) []string {
	return slices.DeleteFunc(slices.Clone(m.Finalizers), func(f string) bool { return !slices.Contains(c.cfg.Legacy, f) })
}

// cached returns the Node from the informer cache, nil when it is gone.
func (c *Controller) cached(name string) (*metav1.PartialObjectMetadata, error) {
	obj, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T in the node cache", obj)
	}
	return m, nil
}

// NeedsFinalizer reports whether a Node must get the finalizer: it is not
// being deleted (a deleting Node cannot gain finalizers) and lacks it, or
// still carries one of the legacy names (an older name of ours, replaced).
func NeedsFinalizer(m *metav1.PartialObjectMetadata, finalizer string, legacy ...string) bool {
	if m.DeletionTimestamp != nil {
		return false
	}
	return !slices.Contains(m.Finalizers, finalizer) || slices.ContainsFunc(m.Finalizers, func(f string) bool { return slices.Contains(legacy, f) })
}

// AddFinalizerPatch is a JSON patch that adds finalizer to a Node whose
// finalizers are current, and drops the legacy names of ours it carries; it
// fails (test op) if they changed since, so a concurrent writer's finalizer
// is never overwritten.
func AddFinalizerPatch(current []string, finalizer string, legacy ...string) ([]byte, error) {
	if len(current) == 0 {
		// A missing list tests equal to null.
		return jsonpatch.Marshal(
			jsonpatch.Test("/metadata/finalizers", nil),
			jsonpatch.Add("/metadata/finalizers", []string{finalizer}))
	}
	kept := slices.DeleteFunc(slices.Clone(current), func(f string) bool { return slices.Contains(legacy, f) })
	if len(kept) == len(current) {
		return jsonpatch.Marshal(
			jsonpatch.Test("/metadata/finalizers", current),
			jsonpatch.Add("/metadata/finalizers/-", finalizer))
	}
	if !slices.Contains(kept, finalizer) {
		kept = append(kept, finalizer)
	}
	return jsonpatch.Marshal(
		jsonpatch.Test("/metadata/finalizers", current),
		jsonpatch.Replace("/metadata/finalizers", kept))
}

// RemoveFinalizerPatch is a JSON patch that removes only the finalizers in
// remove from the Node with uid whose finalizers are current: it tests the
// UID (a Node re-created under the same name is never touched) and each
// entry at the index it removes (someone else's finalizer is never removed
// instead). It returns nil when current holds none of them.
func RemoveFinalizerPatch(uid types.UID, current []string, remove ...string) ([]byte, error) {
	ops := []jsonpatch.Op{jsonpatch.Test("/metadata/uid", string(uid))}
	// From the end, so that each index still points at its entry.
	for i := len(current) - 1; i >= 0; i-- {
		if !slices.Contains(remove, current[i]) {
			continue
		}
		path := "/metadata/finalizers/" + strconv.Itoa(i)
		ops = append(ops, jsonpatch.Test(path, current[i]), jsonpatch.Remove(path))
	}
	if len(ops) == 1 {
		return nil, nil
	}
	return jsonpatch.Marshal(ops...)
}
