// Package plugins holds the built-in cleanup plugins, one file each, and the
// table that names them. Adding a plugin touches its file, its test, this
// table and its section of docs/cleanup-plugins.md.
package plugins

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// Builtins is the plugin table, in the order plugins are listed in docs.
func Builtins() []cleanup.Builtin {
	return []cleanup.Builtin{
		// Opt-in; volumeattachments runs after it when both are enabled, so
		// with the node tainted kube-controller-manager detaches at once.
		{Name: OutOfServiceName, Defaults: cleanup.Spec{Timeout: 3 * time.Minute}, New: newOutOfService},
		{Name: VolumeAttachmentsName, Defaults: cleanup.Spec{Critical: true, Timeout: 2 * time.Minute, After: []string{OutOfServiceName}}, New: newVolumeAttachments},
		{Name: LocalVolumesName, Defaults: cleanup.Spec{Critical: true, Timeout: time.Minute}, New: newLocalVolumes},
		{Name: PortworxName, Defaults: cleanup.Spec{Critical: true, Timeout: 2 * time.Minute}, New: newPortworx},
		{Name: NotifyName, Defaults: cleanup.Spec{Timeout: 30 * time.Second}, New: newNotify},
		{Name: HookName, Defaults: cleanup.Spec{Timeout: time.Minute}, New: newHook},
		{Name: LogName, Defaults: cleanup.Spec{Enabled: true, Timeout: 5 * time.Second}, New: newLog},
	}
}

// stillSameNode reports whether the Node named like node is still the one
// being cleaned up (same UID). A Node re-created under the same name must not
// be touched by the old one's cleanup; a Node already gone is the old one.
func stillSameNode(ctx context.Context, c kubernetes.Interface, node *corev1.Node) (bool, error) {
	cur, err := c.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get node %s: %w", node.Name, err)
	}
	return cur.UID == node.UID, nil
}

// createdBeforeDeletion reports whether obj already existed when node was
// marked for deletion; later objects belong to whatever replaced it.
func createdBeforeDeletion(obj metav1.Object, node *corev1.Node) bool {
	if node.DeletionTimestamp == nil {
		return true
	}
	return !obj.GetCreationTimestamp().After(node.DeletionTimestamp.Time)
}

// ignoreGone treats "already deleted" and "a different object now holds the
// name" (UID precondition failed) as done.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
