package nodecleanup

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// RemoveFinalizer removes only the finalizers in remove (ours: the current
// name and legacy ones) from the Node name with uid, with a guarded JSON
// patch; it re-reads the Node and tries again when the finalizer list
// changed underneath. A Node that is gone, was re-created (another UID) or
// carries none of them is done: false, nil.
func RemoveFinalizer(ctx context.Context, client metadata.Interface, name string, uid types.UID, finalizers []string, remove ...string) (bool, error) {
	nodes := client.Resource(NodesResource)
	for try := 0; ; try++ {
		patch, err := RemoveFinalizerPatch(uid, finalizers, remove...)
		if err != nil || patch == nil {
			return false, err
		}
		_, err = nodes.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerWebhook})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) || try >= 5:
			return false, fmt.Errorf("remove finalizer from node %s: %w", name, err)
		}
		// A test op failed: read the Node as it is now and decide again.
		cur, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("get node %s: %w", name, err)
		}
		if cur.UID != uid {
			return false, nil
		}
		finalizers = cur.Finalizers
	}
}
