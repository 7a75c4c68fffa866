//go:build e2e

package agentkit

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// ThreeNodesVerifiedWithEventsAndMetrics: three agents verify their nodes,
// record NodeVerified, serve health and metrics (valid for promtool, every
// check passing), and log JSON lines carrying the node name. It returns the
// agents, for a caller's own assertions.
func (k Kit) ThreeNodesVerifiedWithEventsAndMetrics(t *testing.T, prefix string) []*Agent {
	t.Helper()
	agents := k.StartFleet(t, prefix, 3)
	for _, a := range agents {
		n := a.Node
		k.CP.WaitNode(t, n.Name, 20*time.Second, "verified", Verified)
		k.CP.WaitEvent(t, 10*time.Second, "Node", n.Name, api.EventNodeVerified, "")
	}

	a := agents[0]
	if code, _ := HTTPGet(t, a.URL("/healthz")); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := HTTPGet(t, a.URL("/readyz")); code != 200 {
		t.Errorf("/readyz = %d %s", code, body)
	}
	_, metrics := HTTPGet(t, a.URL("/metrics"))
	bin, err := harness.FirstTool(k.CP.BinDir, "promtool")
	if err != nil {
		t.Fatal(err)
	}
	promtool := exec.Command(bin, "check", "metrics")
	promtool.Stdin = strings.NewReader(metrics)
	if out, err := promtool.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	for _, want := range []string{
		"node_ready_verified 1",
		"node_ready_consecutive_failures 0",
		`node_ready_taint_operations_total{operation="remove",result="success"} 1`,
		`node_check_success{check="dns"} 1`,
		`node_check_success{check="api"} 1`,
		`node_check_success{check="network"} 1`,
		`node_check_success{check="discovery"} 1`,
		`node_check_failures_total{check="dns"} 0`,
		`node_check_duration_seconds_count{check="network"}`,
		"node_ready_time_to_verified_seconds ",
		"node_ready_build_info{",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Every log line is JSON carrying the node name.
	text := a.LogT(t)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"node":"`+a.Node.Name+`"`) {
			t.Errorf("log line is not JSON with the node name: %s", line)
			break
		}
	}
	return agents
}

// RetaintWithinFleetBudgetAndRecovery: with cluster DNS down, four agents
// at --fleet-budget=50% re-taint exactly two nodes (with the unhealthy
// taint, verified=false, NodeRetainted) and the other two record
// RetaintSuppressed, through more failing rounds; when DNS is back every
// node verifies again. The cluster must hold only the four nodes.
func (k Kit) RetaintWithinFleetBudgetAndRecovery(t *testing.T, prefix string) {
	t.Helper()
	const count = 4
	// 4 nodes in the cluster at 50%: at most 2 may be re-tainted.
	agents := k.StartFleet(t, prefix, count, "--fleet-budget=50%")
	var nodes []harness.Node
	for _, a := range agents {
		nodes = append(nodes, a.Node)
	}
	for _, n := range nodes {
		k.CP.WaitNode(t, n.Name, 20*time.Second, "verified", Verified)
	}
	if total := len(k.ListNodes(t)); total != count {
		t.Fatalf("cluster has %d nodes, test assumes %d", total, count)
	}

	if err := k.CP.StopDNS(); err != nil {
		t.Fatal(err)
	}
	dnsStopped := true
	t.Cleanup(func() {
		if dnsStopped {
			_ = k.CP.StartDNS(context.Background())
		}
	})
	// 3 failed 1 s rounds, then the budget: exactly 2 re-tainted, the rest suppressed.
	atMostTwo := func() (bool, string) {
		got := k.Retainted(t)
		return got <= 2, fmt.Sprintf("%d nodes re-tainted, want at most 2 (50%% of %d)", got, count)
	}
	harness.Eventually(t, 20*time.Second, "2 nodes re-tainted", func() (bool, string) {
		if ok, why := atMostTwo(); !ok {
			t.Fatal(why)
		}
		got := k.Retainted(t)
		return got == 2, fmt.Sprintf("%d nodes re-tainted", got)
	})
	// More failing rounds on every node: the budget must keep holding.
	harness.WaitCounters(t, Daemons(agents), Iterations, 4, "more failing rounds", atMostTwo)
	if got := k.Retainted(t); got != 2 {
		t.Fatalf("%d nodes re-tainted, want exactly 2 (50%% of %d)", got, count)
	}
	suppressed := 0
	for _, n := range nodes {
		node := k.CP.GetNode(t, n.Name)
		if Tainted(node) {
			k.CP.WaitEvent(t, 5*time.Second, "Node", n.Name, api.EventNodeRetainted, "")
			if node.Labels["node-ready/verified"] != "false" {
				t.Errorf("re-tainted node %s has verified=%q", n.Name, node.Labels["node-ready/verified"])
			}
			// The startup taint is only ever removed: autoscalers must see a
			// broken node, not one that is still starting.
			if !HasTaint(node, UnhealthyTaint) || HasTaint(node, harness.StartupTaint) {
				t.Errorf("re-tainted node %s has taints %v, want %s and not %s", n.Name, node.Spec.Taints, UnhealthyTaint.Key, harness.StartupTaint.Key)
			}
			continue
		}
		k.CP.WaitEvent(t, 5*time.Second, "Node", n.Name, api.EventRetaintSuppressed, "")
		suppressed++
	}
	if suppressed != 2 {
		t.Errorf("%d nodes suppressed, want 2", suppressed)
	}
	for _, a := range agents {
		if _, m := HTTPGet(t, a.URL("/metrics")); !strings.Contains(m, `node_check_success{check="dns"} 0`) {
			t.Errorf("agent %s does not report the dns check failing", a.Node.Name)
		}
	}

	if err := k.CP.StartDNS(t.Context()); err != nil {
		t.Fatal(err)
	}
	dnsStopped = false
	for _, n := range nodes {
		k.CP.WaitNode(t, n.Name, 20*time.Second, "verified again", Verified)
	}
}
