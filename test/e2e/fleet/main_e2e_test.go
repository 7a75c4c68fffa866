//go:build e2e

// Package fleet_test runs the fleet simulator (test/bench/fleet) against the
// real control plane at a small size, so the machinery of the scale
// benchmarks cannot rot: simulated agents make the requests a real agent
// process makes, and a fleet keeps its per-node request rate and its
// re-taint budget.
package fleet_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var cp *harness.ControlPlane

func TestMain(m *testing.M) {
	harness.MainWithControlPlane(m, harness.Options{AuditLog: true, Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		return cp.ApplyChartRBAC(ctx, harness.AgentNamespace)
	})
}

// newNodes creates count nodes named prefix-0, prefix-1, ..., removed when
// the test ends.
func newNodes(t *testing.T, prefix string, count int) []harness.Node {
	t.Helper()
	var nodes []harness.Node
	for i := range count {
		nodes = append(nodes, cp.NewNode(t, fmt.Sprintf("%s-%d", prefix, i), harness.NodeOptions{}))
	}
	return nodes
}

// startFleet runs a simulated agent for each node as opts says, stopped
// when the test ends.
func startFleet(t *testing.T, nodes []harness.Node, opts fleet.Options) *fleet.Fleet {
	t.Helper()
	f := fleet.New(cp, opts)
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := f.Start(t.Context(), nodes...); err != nil {
		t.Fatal(err)
	}
	return f
}

// urls are the fleet's /metrics, for harness.WaitCountersAt.
func urls(f *fleet.Fleet) []string {
	var out []string
	for _, a := range f.Agents() {
		out = append(out, a.MetricsURL())
	}
	return out
}

// iterations counts an agent's loop iterations (rounds).
var iterations = harness.Counter{Name: "node_ready_loop_iterations_total"}
