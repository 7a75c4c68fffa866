//go:build e2e

package chart_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup/plugins"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// outOfServiceNode creates a node held by a foreign finalizer, deleted when
// deleting, whose Ready condition is ready (as kube-controller-manager
// writes it for a silent kubelet: Unknown, NodeStatusUnknown; or the
// kubelet's own True), and returns it as it is now.
func outOfServiceNode(t *testing.T, name string, deleting bool, ready corev1.ConditionStatus, reason string) *corev1.Node {
	t.Helper()
	ctx := t.Context()
	if _, err := cp.CreateNode(ctx, name, harness.NodeOptions{ExtraTaints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cp.Client.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := merge(`{"metadata":{"finalizers":["example.com/keep"]}}`).do(ctx, cp.Client, name, false); err != nil {
		t.Fatal(err)
	}
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: reason,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if deleting {
		if err := cp.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err = cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ownPatch is the out-of-service plugin's patch of n, as it sends it.
func ownPatch(t *testing.T, n *corev1.Node) nodeWrite {
	t.Helper()
	p, err := plugins.OutOfServicePatch(n)
	if err != nil {
		t.Fatal(err)
	}
	return nodeWrite{pt: types.JSONPatchType, patch: string(p)}
}

// TestWebhookAddsOnlyTheOutOfServiceTaint: with the out-of-service cleanup
// plugin enabled, the chart's node-writes policy lets the webhook's
// ServiceAccount add node.kubernetes.io/out-of-service=nodeshutdown:NoExecute
// with the plugin's own patch, and nothing more: not to a node that is not
// being deleted, not to one whose Ready is the kubelet's own, not with
// another value or effect, not beside any other change of the spec or of
// its taints, and never remove it. With the plugin disabled (the default)
// the same patch is denied like every other spec change.
func TestWebhookAddsOnlyTheOutOfServiceTaint(t *testing.T) {
	ctx := t.Context()
	const ns = "privilege-webhook-oos"
	const spec = "may not change a node's spec"
	gone := outOfServiceNode(t, "oos-deleted-silent", true, corev1.ConditionUnknown, "NodeStatusUnknown")
	goneFalse := outOfServiceNode(t, "oos-deleted-false", true, corev1.ConditionFalse, "NodeStatusUnknown")
	live := outOfServiceNode(t, "oos-live-silent", false, corev1.ConditionUnknown, "NodeStatusUnknown")
	answers := outOfServiceNode(t, "oos-deleted-answers", true, corev1.ConditionTrue, "KubeletReady")
	ownFalse := outOfServiceNode(t, "oos-deleted-kubelet-false", true, corev1.ConditionFalse, "KubeletNotReady")

	webhook := webhookOnNodes(t, ns, "webhook.cleanup.plugins.out-of-service.grace=30s")
	waitForDenial(t, webhook, gone.Name, merge(`{"spec":{"unschedulable":true}}`))

	taint := func(key, value string, effect corev1.TaintEffect) jsonpatch.Op {
		return jsonpatch.Add("/spec/taints/-", corev1.Taint{Key: key, Value: value, Effect: effect})
	}
	oos := corev1.TaintNodeOutOfService
	for _, tc := range []struct {
		what  string
		node  *corev1.Node
		write nodeWrite
	}{
		{"a node not being deleted", live, ownPatch(t, live)},
		{"a deleted node whose kubelet answers (Ready True)", answers, ownPatch(t, answers)},
		{"a deleted node whose kubelet says NotReady itself", ownFalse, ownPatch(t, ownFalse)},
		{"another value", gone, jsonPatch(t, taint(oos, "x", corev1.TaintEffectNoExecute))},
		{"another effect", gone, jsonPatch(t, taint(oos, "nodeshutdown", corev1.TaintEffectNoSchedule))},
		{"twice, with another effect too", gone, jsonPatch(t, taint(oos, "nodeshutdown", corev1.TaintEffectNoExecute), taint(oos, "nodeshutdown", corev1.TaintEffectNoSchedule))},
		{"with another taint", gone, jsonPatch(t, taint(oos, "nodeshutdown", corev1.TaintEffectNoExecute), taint("evil", "", corev1.TaintEffectNoExecute))},
		{"with another taint removed", gone, jsonPatch(t, jsonpatch.Replace("/spec/taints", []corev1.Taint{plugins.OutOfServiceTaint}))},
		{"with spec.unschedulable", gone, jsonPatch(t, taint(oos, "nodeshutdown", corev1.TaintEffectNoExecute), jsonpatch.Add("/spec/unschedulable", true))},
	} {
		deniedByPolicy(t, webhook, tc.node.Name, tc.what, tc.write, spec)
	}

	// The plugin's own writes pass, on both forms of a silent kubelet.
	for _, n := range []*corev1.Node{gone, goneFalse} {
		if _, err := ownPatch(t, n).do(ctx, webhook, n.Name, false); err != nil {
			t.Fatalf("the plugin's taint on %s: %v", n.Name, err)
		}
		got, err := cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Taints) != len(n.Spec.Taints)+1 || !got.Spec.Taints[len(n.Spec.Taints)].MatchTaint(&plugins.OutOfServiceTaint) {
			t.Errorf("%s's taints after the plugin's patch: %v", n.Name, got.Spec.Taints)
		}
	}
	// Once there, it is not the webhook's to remove or change.
	deniedByPolicy(t, webhook, gone.Name, "the taint removed", jsonPatch(t, jsonpatch.Remove("/spec/taints/2")), spec)
	deniedByPolicy(t, webhook, gone.Name, "the taint changed", jsonPatch(t, jsonpatch.Replace("/spec/taints/2/value", "x")), spec)

	// The plugin disabled (the chart's default): the same patch is denied.
	other := outOfServiceNode(t, "oos-deleted-silent-2", true, corev1.ConditionUnknown, "NodeStatusUnknown")
	webhook = webhookOnNodes(t, ns)
	waitForDenial(t, webhook, other.Name, ownPatch(t, other))
	deniedByPolicy(t, webhook, other.Name, "the plugin's patch without the plugin", ownPatch(t, other), spec)
}
