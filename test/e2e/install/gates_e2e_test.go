//go:build e2e

package install_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/installkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// csiDriver is the driver the CSI drivers gate waits for here.
const csiDriver = "csi.example.com"

// testCSIDriversGate: with agent.gates.csiDrivers.drivers set, a real node
// joins with the CSINode its kubelet created (no driver registered) and
// keeps its startup taint, its agent reading that CSINode through the
// chart's grant; once the driver is in the CSINode, as the kubelet writes
// it when the driver's node plugin registers, the node is verified. The
// last step: the gate stays on.
func testCSIDriversGate(t *testing.T) {
	ctx := t.Context()
	// No wait for the rollout: the joining node's agent pod comes from the
	// new template.
	kit.C.HelmT(t, "upgrade", installkit.Release, kit.Chart, "--namespace", installkit.Namespace, "--reuse-values",
		"--set", "agent.gates.csiDrivers.drivers={"+csiDriver+"}")
	if role := kit.C.KubectlT(t, "", "get", "clusterrole", installkit.Release+"-agent", "-o", "yaml"); !strings.Contains(role, "csinodes") {
		t.Fatalf("agent ClusterRole with the CSI drivers gate on grants no csinodes:\n%s", role)
	}

	n, err := kit.C.AddNode(ctx, harness.RealNodeOptions{Name: "csi-gate", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	csiNodes := kit.C.Client.StorageV1().CSINodes()
	var csi *storagev1.CSINode
	var pod corev1.Pod
	// The agent writes its condition as soon as it runs; the kubelet reports
	// the pod Running on its own schedule, later on a busy machine.
	harness.Eventually(t, 2*time.Minute, "the kubelet's CSINode, and the agent holding the node for the driver", func() (bool, string) {
		csi, err = csiNodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node, err := kit.C.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var running bool
		pod, running = kit.AgentPods(t)[n.Name]
		return running && strings.Contains(installkit.Why(node), "failing: csidrivers"),
			fmt.Sprintf("CSINode drivers %v; condition %s; agent pod running: %v", csi.Spec.Drivers, installkit.Why(node), running)
	})
	if !slices.Contains(pod.Spec.Containers[0].Args, "--gate.csidrivers="+csiDriver) {
		t.Fatalf("agent pod %s on %s runs with %q, not --gate.csidrivers=%s", pod.Name, n.Name, pod.Spec.Containers[0].Args, csiDriver)
	}
	if ok, _ := kit.Verified(t, n.Name); ok {
		t.Fatalf("node %s verified while %s is not registered", n.Name, csiDriver)
	}
	csi.Spec.Drivers = append(csi.Spec.Drivers, storagev1.CSINodeDriver{Name: csiDriver, NodeID: n.Name})
	if _, err := csiNodes.Update(ctx, csi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	registered := time.Now()
	harness.Eventually(t, 30*time.Second, "node verified once the driver registered", func() (bool, string) { return kit.Verified(t, n.Name) })
	t.Logf("%s: held %s by the CSI drivers gate; verified %s after the driver registered",
		n.Name, registered.Sub(start).Round(time.Millisecond), time.Since(registered).Round(time.Millisecond))
}
