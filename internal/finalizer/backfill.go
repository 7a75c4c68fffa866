package finalizer

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
)

// fieldManager names our writes in managedFields.
const fieldManager = "kube-node-ready-webhook"

// syncBackfill brings one Node to the desired state: not being deleted →
// carries the finalizer. (Nodes being deleted are syncCleanup's business.)
func (c *Controller) syncBackfill(ctx context.Context, name string, requeues int) error {
	m, err := c.cached(name)
	if m == nil || err != nil {
		return err
	}
	if !NeedsFinalizer(m, c.cfg.Finalizer) {
		return nil
	}
	if c.cfg.BackfillAllowed != nil && !c.cfg.BackfillAllowed(ctx) {
		c.log.Debug("back-fill paused: the webhook configuration is absent", "node", name)
		return nil
	}
	patch, err := AddFinalizerPatch(m.Finalizers, c.cfg.Finalizer)
	if err != nil {
		return err
	}
	_, err = c.client.Resource(NodesResource).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		c.patches.WithLabelValues("error").Inc()
		c.log.Warn("finalizer back-fill failed; retrying", "node", name, "error", err, "retries", requeues)
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	c.patches.WithLabelValues("success").Inc()
	c.log.Info("finalizer added to node", "node", name, "finalizer", c.cfg.Finalizer)
	return nil
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

// NeedsFinalizer reports whether a Node must get the finalizer: it lacks it
// and is not being deleted (a deleting Node cannot gain finalizers).
func NeedsFinalizer(m *metav1.PartialObjectMetadata, finalizer string) bool {
	return m.DeletionTimestamp == nil && !slices.Contains(m.Finalizers, finalizer)
}

// AddFinalizerPatch is a JSON patch that adds finalizer to a Node whose
// finalizers are current, and fails (test op) if they changed since, so a
// concurrent writer's finalizer is never overwritten.
func AddFinalizerPatch(current []string, finalizer string) ([]byte, error) {
	if len(current) == 0 {
		// A missing list tests equal to null.
		return jsonpatch.Marshal(
			jsonpatch.Test("/metadata/finalizers", nil),
			jsonpatch.Add("/metadata/finalizers", []string{finalizer}))
	}
	return jsonpatch.Marshal(
		jsonpatch.Test("/metadata/finalizers", current),
		jsonpatch.Add("/metadata/finalizers/-", finalizer))
}

// RemoveFinalizerPatch is a JSON patch that removes only finalizer from the
// Node with uid whose finalizers are current: it tests the UID (a Node
// re-created under the same name is never touched) and the entry at the
// index it removes (someone else's finalizer is never removed instead). It
// returns nil when finalizer is not in current.
func RemoveFinalizerPatch(uid types.UID, current []string, finalizer string) ([]byte, error) {
	i := slices.Index(current, finalizer)
	if i < 0 {
		return nil, nil
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	return jsonpatch.Marshal(
		jsonpatch.Test("/metadata/uid", string(uid)),
		jsonpatch.Test(path, finalizer),
		jsonpatch.Remove(path))
}
