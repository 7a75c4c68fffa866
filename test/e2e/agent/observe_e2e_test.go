//go:build e2e

package agent_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestObserveRecordsWhatEnforceDoes runs one fault script twice, under
// enforce and under observe, with the real agent and the chart's RBAC and
// policies: a new node whose gate keeps failing, a node whose DNS breaks
// after it verified, and a healthy node. Enforce holds the first with the
// startup taint and re-taints the second; observe changes no taint on any
// node (its nodes start as the webhook leaves them in observe mode: no
// taint, marked "observed"), and what it records it would have done —
// condition, Events, metrics — names the same nodes and actions.
func TestObserveRecordsWhatEnforceDoes(t *testing.T) {
	const gpu = "example.com/gpu"
	type outcome struct{ held, retainted []string }
	run := func(t *testing.T, mode string) (outcome, map[string]*agent) {
		opts := harness.NodeOptions{}
		if mode == api.ModeObserve {
			opts = harness.NodeOptions{NoStartupTaint: true,
				Annotations: map[string]string{api.StartupTaintAdmissionAnnotation: api.StartupTaintObserved}}
		}
		names := map[string]string{}
		var nodes []harness.Node
		for _, role := range []string{"gate", "dns", "ok"} {
			n := cp.NewNode(t, mode+"-"+role, opts)
			quantity := "4"
			if role == "gate" {
				quantity = "0"
			}
			setAllocatable(t, n.Name, gpu, quantity)
			names[role] = n.Name
			nodes = append(nodes, n)
		}
		publishPeers(t, nodes...)
		resolv := map[string]string{}
		agents := map[string]*agent{}
		for _, n := range nodes {
			resolv[n.Name] = ownResolvConf(t)
			agents[n.Name] = startAgent(t, n, "--mode="+mode, "--gate.extendedresources="+gpu, "--retaint-threshold=3",
				"--fleet-budget=100%", "--check.dns.resolv-conf="+resolv[n.Name])
		}
		for _, role := range []string{"dns", "ok"} {
			cp.WaitNode(t, names[role], 20*time.Second, "verified", verified)
		}
		breakDNS(t, resolv[names["dns"]])
		// Twice the threshold of 1 s rounds on every agent; under observe no
		// node carries a taint at any point.
		var untainted func() (bool, string)
		if mode == api.ModeObserve {
			untainted = func() (bool, string) {
				for _, n := range nodes {
					if taints := cp.GetNode(t, n.Name).Spec.Taints; len(taints) != 0 {
						return false, fmt.Sprintf("observe: node %s tainted %v", n.Name, taints)
					}
				}
				return true, ""
			}
		}
		harness.WaitCounters(t, daemons(slices.Collect(maps.Values(agents))), iterations, 6, "rounds past --retaint-threshold", untainted)

		var got outcome
		for _, role := range []string{"gate", "dns", "ok"} {
			name := names[role]
			node := cp.GetNode(t, name)
			c := condition(node)
			reason := ""
			if c != nil {
				reason = c.Reason
			}
			switch mode {
			case api.ModeEnforce:
				if hasTaint(node, harness.StartupTaint) {
					got.held = append(got.held, role)
				}
				if hasTaint(node, unhealthyTaint) {
					got.retainted = append(got.retainted, role)
				}
			case api.ModeObserve:
				if len(node.Spec.Taints) != 0 || node.Labels["node-ready/verified"] == "false" {
					t.Errorf("observe: node %s has taints %v, labels %v; want no taint of ours and never verified=false", name, node.Spec.Taints, node.Labels)
				}
				a := agents[name]
				if n := a.Metric(t, "node_ready_taint_operations_total", `operation="add"`); n != 0 {
					t.Errorf("observe: %v re-taints written on %s", n, name)
				}
				switch reason {
				case api.ReasonWouldHold:
					got.held = append(got.held, role)
				case api.ReasonWouldRetaint:
					got.retainted = append(got.retainted, role)
					cp.WaitEvent(t, 5*time.Second, "Node", name, api.EventNodeWouldBeRetainted, "")
				}
				if want := metricsserver.Bool(reason == api.ReasonWouldHold || reason == api.ReasonWouldRetaint); a.Metric(t, "node_ready_would_be_tainted") != want {
					t.Errorf("observe: node_ready_would_be_tainted on %s = %v, want %v (condition %s)", name, a.Metric(t, "node_ready_would_be_tainted"), want, reason)
				}
			}
		}
		return got, agents
	}

	enforce, _ := run(t, api.ModeEnforce)
	if want := (outcome{held: []string{"gate"}, retainted: []string{"dns"}}); fmt.Sprint(enforce) != fmt.Sprint(want) {
		t.Fatalf("enforce held %v and re-tainted %v, want %v and %v: the script did not stage its faults", enforce.held, enforce.retainted, want.held, want.retainted)
	}
	observe, agents := run(t, api.ModeObserve)
	if fmt.Sprint(observe) != fmt.Sprint(enforce) {
		t.Errorf("observe would have held %v and re-tainted %v; enforce held %v and re-tainted %v", observe.held, observe.retainted, enforce.held, enforce.retainted)
	}
	if a := agents["observe-gate"]; a.Metric(t, "node_ready_mode", `mode="observe"`) != 1 || a.Metric(t, "node_ready_would_taint_operations_total", `operation="hold"`) != 1 {
		t.Errorf("observe-gate: node_ready_mode{observe} = %v, would-hold operations = %v; want 1 and 1",
			a.Metric(t, "node_ready_mode", `mode="observe"`), a.Metric(t, "node_ready_would_taint_operations_total", `operation="hold"`))
	}
	// The healthy node and the one whose DNS broke verified: observe labels
	// them, as enforce does, and never writes verified=false.
	for _, name := range []string{"observe-ok", "observe-dns"} {
		if got := cp.GetNode(t, name).Labels["node-ready/verified"]; got != "true" {
			t.Errorf("node %s: verified=%q, want true", name, got)
		}
	}
}
