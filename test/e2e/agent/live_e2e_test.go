//go:build e2e

package agent_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestLiveNodesJudgedByContinuousChecksOnly: the chart installed into a
// running cluster. Its nodes carry neither the startup taint nor the
// verified label, and a gate fails on half of them (the extended resources
// gate: no GPU allocatable there). Only continuous checks can lead to a
// re-taint: through rounds well past --retaint-threshold no node is
// re-tainted, whatever the fleet budget allows, and every node is labelled
// verified=true after its first passing round of the continuous checks; the
// gate never runs on them. A new node in the same fleet, whose gate fails
// too, keeps its startup taint: the gate is on and failing.
func TestLiveNodesJudgedByContinuousChecksOnly(t *testing.T) {
	const gpu = "example.com/gpu"
	var live []harness.Node
	for i := range 4 {
		n := cp.NewNode(t, fmt.Sprintf("live-%d", i), harness.NodeOptions{NoStartupTaint: true})
		quantity := "4"
		if i%2 == 0 {
			quantity = "0"
		}
		setAllocatable(t, n.Name, gpu, quantity)
		live = append(live, n)
	}
	fresh := cp.NewNode(t, "live-new", harness.NodeOptions{})
	setAllocatable(t, fresh.Name, gpu, "0")
	all := append(append([]harness.Node(nil), live...), fresh)
	publishPeers(t, all...)

	args := []string{"--gate.extendedresources=" + gpu, "--retaint-threshold=3"}
	var agents []*agent
	for _, n := range live {
		agents = append(agents, startAgent(t, n, args...))
	}
	newAgent := startAgent(t, fresh, args...)

	notRetainted := func() (bool, string) {
		for _, n := range all {
			node := cp.GetNode(t, n.Name)
			if hasTaint(node, unhealthyTaint) || node.Labels["node-ready/verified"] == "false" {
				return false, fmt.Sprintf("node %s re-tainted: taints %v, labels %v", n.Name, node.Spec.Taints, node.Labels)
			}
		}
		return true, ""
	}
	// Twice the threshold of 1 s rounds on every agent: the gate's failures
	// re-tainted a live node by the third before this rule.
	harness.WaitCounters(t, daemons(append(agents, newAgent)), iterations, 6, "rounds past --retaint-threshold", notRetainted)

	for i, n := range live {
		cp.WaitNode(t, n.Name, 5*time.Second, "labelled verified=true", verified)
		node := cp.GetNode(t, n.Name)
		if c := condition(node); c == nil || c.Reason != api.ReasonChecksPassed {
			t.Errorf("node %s: condition %+v, want %s", n.Name, c, api.ReasonChecksPassed)
		}
		a := agents[i]
		if got := a.Metric(t, "node_check_duration_seconds_count", `check="extendedresources"`); got != 0 {
			t.Errorf("the gate ran %v times on live node %s, want 0: it holds the startup taint and nothing else", got, n.Name)
		}
		if got := a.Metric(t, "node_ready_taint_operations_total", `operation="add"`); got != 0 {
			t.Errorf("%v re-taints of live node %s", got, n.Name)
		}
	}

	// The gate is on and failing: it holds the new node's startup taint.
	if got := newAgent.Metric(t, "node_check_failures_total", `check="extendedresources"`); got < 6 {
		t.Errorf("the gate failed %v rounds on the new node, want at least 6", got)
	}
	if n := cp.GetNode(t, fresh.Name); !hasTaint(n, harness.StartupTaint) || hasTaint(n, unhealthyTaint) || n.Labels["node-ready/verified"] != "" {
		t.Errorf("new node %s with its gate failing: taints %v, labels %v; want the startup taint alone, no label", fresh.Name, n.Spec.Taints, n.Labels)
	}
	if c := condition(cp.GetNode(t, fresh.Name)); c == nil || c.Reason != api.ReasonChecksFailing {
		t.Errorf("new node %s: condition %+v, want %s naming the gate", fresh.Name, c, api.ReasonChecksFailing)
	}
	// Its GPUs become allocatable: verified as before.
	setAllocatable(t, fresh.Name, gpu, "4")
	cp.WaitNode(t, fresh.Name, 10*time.Second, "verified once the GPUs are allocatable", verified)
}
