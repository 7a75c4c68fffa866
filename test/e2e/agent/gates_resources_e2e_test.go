//go:build e2e

package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// resourceGateArgs isolate a gate: the api check alone beside it.
var resourceGateArgs = []string{"--checks=api", "--gate.daemonsets=false"}

// wakeArgs leave two start-up rounds 100 ms apart, then 30 s to the next:
// a node untainted within seconds of the awaited object was woken by the
// gate, not by the backoff.
var wakeArgs = []string{"--initial-backoff=100ms", "--initial-tries=2", "--check-period=30s"}

// withResourceGateRBAC applies the chart's RBAC with the CSI drivers and
// DRA gates on (their grants are rendered only then), and the default
// chart's again when the test ends.
func withResourceGateRBAC(t *testing.T) {
	t.Helper()
	if err := cp.ApplyChartRBAC(t.Context(), harness.AgentNamespace,
		"agent.gates.csiDrivers.drivers={csi.example.com}", "agent.gates.dra.drivers={gpu.example.com}"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.ApplyChartRBAC(context.Background(), harness.AgentNamespace); err != nil {
			t.Errorf("restore the chart's default RBAC: %v", err)
		}
	})
}

// waitGateRounds waits until the gate has failed at least n rounds (its
// failure counter: the positive signal that the agent decided on the node
// with the gate unmet) and returns the count.
func waitGateRounds(t *testing.T, a *agent, gate string, n float64) float64 {
	t.Helper()
	var got float64
	harness.Eventually(t, 10*time.Second, fmt.Sprintf("%g failed rounds of the %s gate", n, gate), func() (bool, string) {
		v, err := a.TryMetric("node_check_failures_total", `check="`+gate+`"`)
		got = v
		return err == nil && v >= n, fmt.Sprintf("%g (err %v)", v, err)
	})
	return got
}

// assertHeld checks, after failed rounds of the gate, that the node is
// still tainted, that its condition names the gate, and that the agent's
// log gives the gate's reason.
func assertHeld(t *testing.T, a *agent, gate, reason string) {
	t.Helper()
	cp.WaitNode(t, a.Node.Name, 5*time.Second, "condition names the "+gate+" gate", func(n *corev1.Node) bool {
		return strings.Contains(agentCondition(n).Message, "failing: "+gate)
	})
	if !tainted(cp.GetNode(t, a.Node.Name)) {
		t.Fatalf("node %s untainted while its %s gate waits", a.Node.Name, gate)
	}
	harness.Eventually(t, 5*time.Second, "the agent logs "+reason, func() (bool, string) {
		return logContains(a.Process, reason), ""
	})
}

// TestCSIDriversGate: with --gate.csidrivers the startup taint stays while
// the node has no CSINode, and while its CSINode does not list the driver
// (as the kubelet writes it before the driver's node plugin registered);
// the driver's registration untaints the node.
func TestCSIDriversGate(t *testing.T) {
	withResourceGateRBAC(t)
	n := cp.NewNode(t, "csi-gate", harness.NodeOptions{})
	a := startAgent(t, n, append(resourceGateArgs, "--gate.csidrivers=csi.example.com")...)
	rounds := waitGateRounds(t, a, "csidrivers", 2)
	assertHeld(t, a, "csidrivers", "no CSINode for this node yet")

	// The kubelet creates the node's CSINode, owned by the Node, at start.
	csiNodes := cp.Client.StorageV1().CSINodes()
	csi, err := csiNodes.Create(t.Context(), &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: cp.GetNode(t, n.Name).UID},
		}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "other.example.com", NodeID: n.Name}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = csiNodes.Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	waitGateRounds(t, a, "csidrivers", rounds+2)
	assertHeld(t, a, "csidrivers", "not registered on this node yet: csi.example.com")

	// The driver's node plugin registers: the kubelet adds it to the CSINode.
	csi.Spec.Drivers = append(csi.Spec.Drivers, storagev1.CSINodeDriver{Name: "csi.example.com", NodeID: n.Name, TopologyKeys: []string{"topology.csi.example.com/zone"}})
	if _, err := csiNodes.Update(t.Context(), csi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, n.Name, 5*time.Second, "verified once the driver registered", verified)
}

// TestExtendedResourcesGate: with --gate.extendedresources the startup
// taint stays while the resource is 0 in the node's allocatable (its
// device plugin registered no healthy device yet); the kubelet's status
// update with devices untaints the node at once (the node's own watch
// wakes the loop: the next round would be 30 s away).
func TestExtendedResourcesGate(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	n := cp.NewNode(t, "gpu-gate", harness.NodeOptions{})
	setAllocatable(t, n.Name, "example.com/gpu", "0")
	a := startAgent(t, n, append(append(resourceGateArgs, wakeArgs...), "--gate.extendedresources=example.com/gpu")...)
	waitGateRounds(t, a, "extendedresources", 2)
	assertHeld(t, a, "extendedresources", "example.com/gpu allocatable is 0")
	setAllocatable(t, n.Name, "example.com/gpu", "4")
	cp.WaitNode(t, n.Name, 5*time.Second, "verified once the GPUs are allocatable", verified)
}

// setAllocatable writes one resource's capacity and allocatable into the
// node's status, as the kubelet does once a device plugin registered.
func setAllocatable(t *testing.T, node, resource, quantity string) {
	t.Helper()
	list := map[string]string{resource: quantity}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": list, "allocatable": list}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Nodes().Patch(t.Context(), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestDRAGate: with --gate.dra the startup taint stays while the driver
// has published one of the two ResourceSlices of the node's pool; the
// second untaints the node at once (the gate's watch wakes the loop: the
// next round would be 30 s away). Another node's slices do not count.
func TestDRAGate(t *testing.T) {
	withResourceGateRBAC(t)
	n := cp.NewNode(t, "dra-gate", harness.NodeOptions{})
	other := cp.NewNode(t, "dra-gate-other", harness.NodeOptions{})
	publishSlice(t, other.Name, 0, 1)
	publishSlice(t, n.Name, 0, 2)
	a := startAgent(t, n, append(append(resourceGateArgs, wakeArgs...), "--gate.dra=gpu.example.com")...)
	waitGateRounds(t, a, "dra", 2)
	assertHeld(t, a, "dra", "gpu.example.com (pool "+n.Name+": 1 of 2 slices)")
	publishSlice(t, n.Name, 1, 2)
	cp.WaitNode(t, n.Name, 5*time.Second, "verified once the pool is published", verified)
}

// publishSlice writes the i-th of count ResourceSlices of node's pool as a
// DRA driver's kubelet plugin does: one pool per node, named after it.
func publishSlice(t *testing.T, node string, i, count int64) {
	t.Helper()
	slices := cp.Client.ResourceV1().ResourceSlices()
	s, err := slices.Create(t.Context(), &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-gpu-%d", node, i)},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			NodeName: &node,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: count},
			Devices:  []resourcev1.Device{{Name: fmt.Sprintf("gpu-%d", i)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slices.Delete(context.Background(), s.Name, metav1.DeleteOptions{}) })
}
