//go:build e2e

// Package agent_test runs the real agent binary, one process per simulated
// node, against the real control plane of the test harness.
//
// The tests share the control plane. Those marked t.Parallel run together,
// after the others, up to parallelTests at once: each runs one agent on a
// node of its own, re-taints nothing and changes nothing another test reads.
// A test stays serial when it counts the fleet (the fleet budget counts every
// node and every re-tainted one), publishes the agents' peers (one set for
// the cluster), or brings a fault the others would see: CoreDNS or the API
// server stopped, frozen or throttled, an admission policy or RBAC changed,
// the re-taint Lease taken.
package agent_test

import (
	"context"
	"flag"
	"log"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/agentkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const agentSA = harness.AgentServiceAccount

var cp *harness.ControlPlane

// kit runs agents on cp (test/e2e/agentkit, shared with the IPv6 package);
// the names below are its helpers under this package's short names.
var kit agentkit.Kit

// parallelTests is -test.parallel unless given: the parallel tests wait on
// their agents' rounds most of the time, so more of them than cores fit.
const parallelTests = 6

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelTests)); err != nil {
			log.Fatal(err)
		}
	}
	harness.MainWithControlPlane(m, harness.Options{AuditLog: true, Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		kit = agentkit.Kit{CP: c}
		return cp.ApplyChartRBAC(ctx, harness.AgentNamespace)
	})
}

// agent is one running agent process playing one node.
type agent = agentkit.Agent

var (
	iterations     = agentkit.Iterations
	unhealthyTaint = agentkit.UnhealthyTaint
	tainted        = agentkit.Tainted
	hasTaint       = agentkit.HasTaint
	verified       = agentkit.Verified
	httpGet        = agentkit.HTTPGet
	daemons        = agentkit.Daemons
)

func nodeHolds(t *testing.T, name, want string, cond func(*corev1.Node) bool) func() (bool, string) {
	return kit.NodeHolds(t, name, want, cond)
}

func baseArgs(node harness.Node, kubeconfig string) []string { return kit.BaseArgs(node, kubeconfig) }

func nodeKubeconfig(t *testing.T, sa string, node harness.Node) string {
	t.Helper()
	return kit.NodeKubeconfig(t, sa, node)
}

func startAgent(t *testing.T, node harness.Node, extra ...string) *agent {
	t.Helper()
	return kit.StartAgent(t, node, extra...)
}

func startFleet(t *testing.T, prefix string, count int, extra ...string) []*agent {
	t.Helper()
	return kit.StartFleet(t, prefix, count, extra...)
}

func publishPeers(t *testing.T, nodes ...harness.Node) {
	t.Helper()
	kit.PublishPeers(t, nodes...)
}

func logCount(p *harness.Process, s string) int {
	text, _ := p.Log()
	return strings.Count(text, s)
}

func logContains(p *harness.Process, s string) bool {
	text, err := p.Log()
	return err == nil && strings.Contains(text, s)
}
