//go:build e2e

package cleanup

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const ipLegacy = "10.213.0.25"

// TestLegacyFinalizerIsNotStranded: after the finalizer is renamed, the
// webhook started with the old name in --legacy-finalizers replaces it on a
// live node and, on a node being deleted under the old name, runs the
// cleanup and removes it, so the deletion completes. Nobody else's
// finalizer is touched.
func TestLegacyFinalizerIsNotStranded(t *testing.T) {
	const renamed = "example.com/renamed-cleanup"
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx := t.Context()
	// The chart rendered as `helm upgrade --set webhook.finalizer=<new>`
	// renders it: its node policy lets the webhook write the new name and
	// the legacy one.
	if err := cp.ApplyChartRBAC(ctx, ns, "webhook.finalizer="+renamed, "webhook.legacyFinalizers={"+fin+"}"); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "legacy-live", Finalizers: []string{fin, "example.com/keep"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "legacy-deleted", Finalizers: []string{fin, "example.com/keep"}}},
	} {
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, "legacy-deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w := cp.StartWebhook(t, "webhook-legacy", ipLegacy,
		"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name=webhook-legacy",
		"--webhook-config-name=", "--extra-sans="+ipLegacy,
		"--finalizer="+renamed, "--legacy-finalizers="+fin, "--log-level=debug")
	w.WaitReady(t, 30*time.Second)

	cp.WaitNode(t, "legacy-live", 30*time.Second, "the old name replaced by the new one", func(n *corev1.Node) bool {
		return slices.Equal(n.Finalizers, []string{"example.com/keep", renamed})
	})
	cp.WaitNode(t, "legacy-deleted", 30*time.Second, "cleaned up and the old name removed", func(n *corev1.Node) bool {
		return slices.Equal(n.Finalizers, []string{"example.com/keep"})
	})
	e := &env{cp: cp, procs: []*harness.Daemon{w}}
	e.waitEvent(t, "legacy-deleted", api.EventCleanupCompleted, "finalizer removed")
}
