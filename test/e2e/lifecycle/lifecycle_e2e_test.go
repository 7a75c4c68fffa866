//go:build e2e

package lifecycle_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/installkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestChartLifecycleOnRealNodes: the chart installed with helm on real
// nodes, upgraded, a node that never verifies replaced under
// webhook.remediation.policy=replace, then uninstalled; each step starts
// from where the one before left the cluster.
func TestChartLifecycleOnRealNodes(t *testing.T) {
	vals := kit.Values(t)
	installkit.Steps(t, []installkit.Step{
		{Name: "install", Run: func(t *testing.T) { kit.Install(t, vals) }},
		{Name: "upgrade", Run: func(t *testing.T) { testUpgrade(t, vals) }},
		{Name: "replace-never-verifying", Run: testReplaceNeverVerifying},
		{Name: "uninstall", Run: testUninstall},
	})
}

// testUpgrade: helm upgrade with a changed value rolls the pods, keeps every
// node verified and admission working with the same caBundle.
func testUpgrade(t *testing.T, vals string) {
	ctx := t.Context()
	names := kit.RealNodeNames()
	caBundle := func() []byte {
		m, err := kit.C.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, installkit.Release+"-webhook", metav1.GetOptions{})
		if err != nil || len(m.Webhooks) == 0 {
			t.Fatalf("webhook configuration: %v", err)
		}
		return m.Webhooks[0].ClientConfig.CABundle
	}
	before := caBundle()
	kit.C.HelmT(t, "upgrade", installkit.Release, kit.Chart, "--namespace", installkit.Namespace, "--values", vals, "--set", "agent.logLevel=debug", "--set", "webhook.logLevel=debug", "--wait", "--timeout", "3m")
	kit.C.KubectlOK(t, "", "rollout", "status", "-n", installkit.Namespace, "daemonset/"+installkit.Release, "--timeout=2m")
	kit.C.KubectlOK(t, "", "rollout", "status", "-n", installkit.Namespace, "deployment/"+installkit.Release+"-webhook", "--timeout=2m")
	if ok, msg := kit.Verified(t, names...); !ok {
		t.Errorf("after upgrade: %s", msg)
	}
	if after := caBundle(); string(after) != string(before) {
		t.Errorf("caBundle changed by helm upgrade")
	}
	node, err := kit.C.CreateNode(ctx, "after-upgrade", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := kit.C.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Finalizers, installkit.Finalizer) {
		t.Errorf("node created after the upgrade has finalizers %v, want %s from admission", got.Finalizers, installkit.Finalizer)
	}
}

// testUninstall: helm uninstall runs the pre-delete Job on a real kubelet and
// leaves no node with the finalizer and no taint changed.
func testUninstall(t *testing.T) {
	ctx := t.Context()
	// A node that died with a CoreDNS pod leaves stale DNS endpoints for a
	// while, which can re-taint a peer: start from every node verified.
	harness.Eventually(t, 2*time.Minute, "every live real node verified", func() (bool, string) { return kit.Verified(t, kit.LiveNodeNames(t)...) })
	// Only the project's taints: the node lifecycle controller changes the
	// simulated node's own not-ready taint meanwhile.
	ours := func(n corev1.Node) string {
		var ts []string
		for _, t := range n.Spec.Taints {
			if harness.OurTaint(t.Key) {
				ts = append(ts, t.ToString())
			}
		}
		return strings.Join(ts, ",")
	}
	taintsBefore := map[string]string{}
	nodes, err := kit.C.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		taintsBefore[n.Name] = ours(n)
	}
	out := kit.C.HelmT(t, "uninstall", installkit.Release, "--namespace", installkit.Namespace, "--wait", "--timeout", "3m")
	t.Logf("helm uninstall: %s", strings.TrimSpace(out))
	nodes, err = kit.C.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if slices.Contains(n.Finalizers, installkit.Finalizer) {
			t.Errorf("node %s still has %s after uninstall", n.Name, installkit.Finalizer)
		}
		if got := ours(n); got != taintsBefore[n.Name] {
			t.Errorf("node %s taints changed by uninstall: %s -> %s", n.Name, taintsBefore[n.Name], got)
		}
	}
	// The hook Job ran as a pod on a real kubelet.
	jobs := kit.C.KubectlOK(t, "", "get", "events", "-n", installkit.Namespace, "--field-selector", "reason=Started", "-o", "jsonpath={range .items[*]}{.involvedObject.name}{\"\\n\"}{end}")
	if !strings.Contains(jobs, "uninstall") {
		t.Errorf("no container of the pre-delete Job started on a kubelet; Started events for: %s", jobs)
	}
}
