//go:build e2e

package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/e2e/installkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// testReplaceNeverVerifying: with webhook.remediation.policy=replace, a real
// node whose pods cannot resolve names (its node drops every DNS query its
// pods send) never verifies, and once past the deadline the webhook deletes
// it: cleanup runs, the Node goes away, and the test then stops its kubelet
// as the instance's termination would. Without a NodeClaim API in this
// cluster, the Node itself is what is deleted.
func testReplaceNeverVerifying(t *testing.T) {
	ctx := t.Context()
	const deadline = 20 * time.Second
	remediation := func(policy string) {
		kit.C.HelmT(t, "upgrade", installkit.Release, kit.Chart, "--namespace", installkit.Namespace, "--reuse-values",
			"--set", "webhook.remediation.policy="+policy,
			"--set", "webhook.remediation.unverifiedDeadline="+deadline.String(),
			"--set", "webhook.remediation.interval=2s",
			"--wait", "--timeout", "3m")
		kit.C.KubectlOK(t, "", "rollout", "status", "-n", installkit.Namespace, "deployment/"+installkit.Release+"-webhook", "--timeout=2m")
	}
	remediation("replace")
	t.Cleanup(func() {
		if _, err := kit.C.Helm(context.Background(), "upgrade", installkit.Release, kit.Chart, "--namespace", installkit.Namespace, "--reuse-values",
			"--set", "webhook.remediation.policy=off", "--wait", "--timeout", "3m"); err != nil {
			t.Errorf("turning remediation off again: %v", err)
		}
	})
	// What the chart granted for replace, and nothing for NodeClaims' absence to need.
	role := kit.C.KubectlOK(t, "", "get", "clusterrole", installkit.Release+"-webhook", "-o", "yaml")
	if !strings.Contains(role, "- delete") || !strings.Contains(role, "nodeclaims") {
		t.Fatalf("webhook ClusterRole under policy replace lacks nodes delete or nodeclaims:\n%s", role)
	}

	n, err := kit.C.AddNode(ctx, harness.RealNodeOptions{NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	// Before its agent pod can start: drop DNS queries arriving from this
	// node's pods (the cni0 bridge), so a CoreDNS replica elsewhere, or here,
	// keeps answering every other node.
	for _, proto := range []string{"udp", "tcp"} {
		if _, err := n.Exec(ctx, "iptables", "-I", "FORWARD", "-i", "cni0", "-p", proto, "--dport", "53", "-j", "DROP"); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()
	stopped := false
	defer func() {
		if !stopped {
			_ = n.Stop()
		}
	}()
	// It runs its agent, which keeps failing dns, and stays tainted.
	harness.Eventually(t, 2*time.Minute, "the agent on "+n.Name+" failing dns", func() (bool, string) {
		node, err := kit.C.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(installkit.Why(node), "dns"), "condition: " + installkit.Why(node)
	})
	harness.Eventually(t, 2*time.Minute, n.Name+" deleted by remediation and cleaned up", func() (bool, string) {
		node, err := kit.C.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("still there; taints %v, condition %s", node.Spec.Taints, installkit.Why(node))
	})
	took := time.Since(created)
	t.Logf("%s replaced %s after it joined (deadline %s)", n.Name, took.Round(time.Second), deadline)
	if took < deadline {
		t.Errorf("%s deleted %s after joining, before the %s deadline", n.Name, took, deadline)
	}
	// The instance goes away.
	if err := n.Stop(); err != nil {
		t.Logf("stop %s: %v", n.Name, err)
	}
	stopped = true
	for _, reason := range []string{api.EventNodeReplacing, api.EventCleanupCompleted} {
		events := kit.C.KubectlOK(t, "", "get", "events", "-A", "--field-selector", "reason="+reason+",involvedObject.name="+n.Name, "-o", "jsonpath={.items[*].message}")
		if strings.TrimSpace(events) == "" {
			t.Errorf("no %s Event for %s", reason, n.Name)
		}
		if reason == api.EventNodeReplacing && !strings.Contains(events, "deleted Node "+n.Name) {
			t.Errorf("NodeReplacing Event of %s says %q, want the Node deleted", n.Name, events)
		}
	}
	logs := kit.C.KubectlOK(t, "", "logs", "-n", installkit.Namespace, "-l", "app=kube-node-ready-webhook", "--tail=-1", "--prefix=false")
	if strings.Count(logs, "the Karpenter NodeClaim API is absent") != 1 {
		t.Errorf("webhook logs should say once that the NodeClaim API is absent:\n%s", logs)
	}
	// PodGC frees the agent pod bound to the deleted node (see test/e2e/install's
	// delete-node step);
	// the node stays gone with its kubelet stopped all along, so the
	// controller manager's acting on its absence is what anchors that.
	harness.Eventually(t, 2*time.Minute, "agent pod of the replaced node garbage-collected", func() (bool, string) {
		if _, err := kit.C.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s back after its kubelet stopped: %v", n.Name, err)
		}
		pods, err := kit.C.Client.CoreV1().Pods(installkit.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods still bound to %s", len(pods.Items), n.Name)
	})
}
