//go:build e2e

package chart_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestAgentHoldsItsNodeAfterARebootOnly: with agent.reverifyAfterReboot the
// chart's policy lets the agent put the startup taint back on its own node
// exactly as the agent's hold writes it (internal/agent NodePatch of the
// hold: the startup taint added, verified true → false), and only while the
// kubelet's boot ID differs from the one the agent's condition records;
// the release (the taint removed, the label true) passes too. Denied: the
// hold with the boot unchanged or none recorded, the taint added with the
// label left "true", another value or effect under the startup key, the
// label removed from a node that keeps the startup taint (remediation
// would read it as never verified), and another node's hold.
func TestAgentHoldsItsNodeAfterARebootOnly(t *testing.T) {
	ctx := t.Context()
	const ns = "privilege-reboot-hold"
	taints := agentTaints(t)
	const bootOld, bootNew = "11111111-2222-4333-8444-000000000001", "11111111-2222-4333-8444-000000000002"
	mk := func(name string) harness.Node {
		node, err := cp.CreateNode(ctx, name, harness.NodeOptions{NoStartupTaint: true, Labels: map[string]string{api.VerifiedLabel: "true"}})
		if err != nil {
			t.Fatal(err)
		}
		return node
	}
	node, other := mk("agent-reboot-hold"), mk("agent-reboot-other")
	// What the kubelet and the agent wrote: the boot ID the node runs under,
	// and the agent's condition naming the one it was verified under.
	boot := func(name, current, recorded string) {
		t.Helper()
		m := api.ConditionMessage{Summary: "all checks pass", HasModes: true, Continuous: []string{"dns"}, Boot: recorded}
		cond := corev1.NodeCondition{Type: agent.ConditionType, Status: corev1.ConditionTrue, Reason: api.ReasonChecksPassed,
			Message: m.String(), LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.NodeInfo.BootID = current
		n.Status.Conditions = []corev1.NodeCondition{cond}
		if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	boot(node.Name, bootNew, bootOld)
	boot(other.Name, bootNew, bootOld)
	agentClient := agentWithChartRBAC(t, ns, node.Name, "agent.reverifyAfterReboot=true")

	// The agent's own hold, as it writes it, on the node as it is now.
	hold := func(name string) nodeWrite {
		t.Helper()
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		patch, err := agent.NodePatch(n, api.VerifiedLabel, agent.Desired{Add: &taints.Startup, Label: "false", Reboot: true})
		if err != nil || patch == nil {
			t.Fatalf("hold patch %s, %v", patch, err)
		}
		return nodeWrite{pt: types.JSONPatchType, patch: string(patch)}
	}
	// The policy is compiled asynchronously, and a render of another test
	// may be in force still: wait until it denies, then until the hold passes.
	waitForDenial(t, agentClient, node.Name, merge(`{"metadata":{"annotations":{"example.com/note":"x"}}}`))
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := hold(node.Name).do(ctx, agentClient, node.Name, true)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the agent's hold of its rebooted node is never allowed: %v", err)
	}

	const (
		reboot   = "may add the startup taint only to hold its own verified node after a reboot"
		addTaint = "may add only the taint"
		unlabel  = "may not remove the " + api.VerifiedLabel + " label from a node that keeps the startup taint"
	)
	startupWith := func(value string, effect corev1.TaintEffect) nodeWrite {
		return jsonPatch(t, jsonpatch.Add("/spec/taints", []corev1.Taint{{Key: taints.Startup.Key, Value: value, Effect: effect}}),
			jsonpatch.Add("/metadata/labels/"+jsonpatch.EscapePointer(api.VerifiedLabel), "false"))
	}
	deniedByPolicy(t, agentClient, node.Name, "the startup taint with NoExecute", startupWith("true", corev1.TaintEffectNoExecute), addTaint)
	deniedByPolicy(t, agentClient, node.Name, "the startup taint with another value", startupWith("false", corev1.TaintEffectNoSchedule), addTaint)
	deniedByPolicy(t, agentClient, node.Name, "the startup taint with the label left true",
		jsonPatch(t, jsonpatch.Add("/spec/taints", []corev1.Taint{taints.Startup})), reboot)
	deniedByPolicy(t, agentClient, other.Name, "another node's hold", hold(other.Name), "may not change node "+other.Name)

	boot(node.Name, bootNew, bootNew)
	deniedByPolicy(t, agentClient, node.Name, "the hold with the boot unchanged", hold(node.Name), reboot)
	boot(node.Name, bootNew, "")
	deniedByPolicy(t, agentClient, node.Name, "the hold with no boot recorded", hold(node.Name), reboot)

	// Held for real, then released by the agent's own writes.
	boot(node.Name, bootNew, bootOld)
	if _, err := hold(node.Name).do(ctx, agentClient, node.Name, false); err != nil {
		t.Fatalf("the agent's hold: %v", err)
	}
	deniedByPolicy(t, agentClient, node.Name, "the label removed while the startup taint stays",
		jsonPatch(t, jsonpatch.Remove("/metadata/labels/"+jsonpatch.EscapePointer(api.VerifiedLabel))), unlabel)
	released := releaseBy(t, agentClient, node.Name, taints)
	if len(released.Spec.Taints) != 0 || released.Labels[api.VerifiedLabel] != "true" {
		t.Errorf("after the release: taints %v, labels %v", released.Spec.Taints, released.Labels)
	}
}

// releaseBy writes the agent's release of a held node (the startup taint
// removed, the label true) as c.
func releaseBy(t *testing.T, c kubernetes.Interface, name string, taints agent.Taints) *corev1.Node {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch, err := agent.NodePatch(n, api.VerifiedLabel, agent.Desired{Remove: []corev1.Taint{taints.Startup, taints.Unhealthy}, Label: "true"})
	if err != nil || patch == nil {
		t.Fatalf("release patch %s, %v", patch, err)
	}
	out, err := (nodeWrite{pt: types.JSONPatchType, patch: string(patch)}).do(t.Context(), c, name, false)
	if err != nil {
		t.Fatalf("the agent's release: %v", err)
	}
	return out
}
