//go:build e2e

// Package agent_test runs the real agent binary, one process per simulated
// node, against the real control plane of the test harness.
package agent_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const agentSA = harness.AgentServiceAccount

var cp *harness.ControlPlane

func TestMain(m *testing.M) {
	harness.MainWithControlPlane(m, harness.Options{AuditLog: true, Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		return cp.ApplyChartRBAC(ctx, harness.AgentNamespace)
	})
}

// agent is one running agent process playing one node.
type agent struct {
	*harness.Daemon
	node harness.Node
}

// iterations counts an agent's loop iterations: rounds of checks, and looks
// at a node that is bypassed or waits for a taint. Tests that assert an
// agent did not do something anchor on it having iterated meanwhile.
var iterations = harness.Counter{Name: "node_ready_loop_iterations_total"}

// looped waits until the agent's loop has run n more times, hold (when not
// nil) holding all along (harness.WaitCounter).
func (a *agent) looped(t *testing.T, n int, what string, hold func() (bool, string)) {
	t.Helper()
	a.WaitCounter(t, iterations, n, what, hold)
}

// nodeHolds is a hold for looped: cond holds for the node named name, as
// want describes it.
func nodeHolds(t *testing.T, name, want string, cond func(*corev1.Node) bool) func() (bool, string) {
	return func() (bool, string) {
		n := cp.GetNode(t, name)
		return cond(n), fmt.Sprintf("node %s is not %s: taints %v, labels %v", name, want, n.Spec.Taints, n.Labels)
	}
}

// testArgs are what every test agent adds to the harness wiring: short
// periods and debug logs.
var testArgs = []string{"--check-period=1s", "--check-timeout=1s", "--initial-backoff=100ms", "--log-level=debug"}

// baseArgs are the flags every test agent runs with: the harness wiring of
// AgentArgs plus testArgs.
func baseArgs(node harness.Node, kubeconfig string) []string {
	return append(cp.AgentArgs(node, kubeconfig), testArgs...)
}

// nodeKubeconfig writes a kubeconfig whose token is bound to a pod on node.
func nodeKubeconfig(t *testing.T, sa string, node harness.Node) string {
	t.Helper()
	path, err := cp.NodeKubeconfig(t.Context(), harness.AgentNamespace, sa, node)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startAgent runs the real agent binary for node, stopped when the test ends.
func startAgent(t *testing.T, node harness.Node, extra ...string) *agent {
	t.Helper()
	return &agent{Daemon: cp.StartAgent(t, node, slices.Concat(testArgs, extra)...), node: node}
}

// startFleet creates count nodes named prefix-0, prefix-1, ..., publishes
// them as each other's peers and runs an agent on each with extra flags.
func startFleet(t *testing.T, prefix string, count int, extra ...string) []*agent {
	t.Helper()
	var nodes []harness.Node
	for i := range count {
		nodes = append(nodes, cp.NewNode(t, fmt.Sprintf("%s-%d", prefix, i), harness.NodeOptions{}))
	}
	publishPeers(t, nodes...)
	var agents []*agent
	for _, n := range nodes {
		agents = append(agents, startAgent(t, n, extra...))
	}
	return agents
}

// daemons are the agents' processes, for harness.WaitCounters.
func daemons(agents []*agent) []*harness.Daemon {
	var out []*harness.Daemon
	for _, a := range agents {
		out = append(out, a.Daemon)
	}
	return out
}

// publishPeers writes the agents' headless Service EndpointSlice.
func publishPeers(t *testing.T, nodes ...harness.Node) {
	t.Helper()
	if err := cp.PublishAgentPeers(t.Context(), nodes...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.DiscoveryV1().EndpointSlices(harness.AgentNamespace).Delete(context.Background(), harness.AgentPeerService, metav1.DeleteOptions{})
	})
}

// unhealthyTaint is the agent's default re-taint taint.
var unhealthyTaint = harness.UnhealthyTaint

// tainted reports whether the node carries the startup or the unhealthy taint.
func tainted(n *corev1.Node) bool {
	return hasTaint(n, harness.StartupTaint) || hasTaint(n, unhealthyTaint)
}

func hasTaint(n *corev1.Node, taint corev1.Taint) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == taint.Key && t.Effect == taint.Effect
	})
}

func verified(n *corev1.Node) bool { return !tainted(n) && n.Labels["node-ready/verified"] == "true" }

// httpGet returns status and body of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func logCount(p *harness.Process, s string) int {
	text, _ := p.Log()
	return strings.Count(text, s)
}

func logContains(p *harness.Process, s string) bool {
	text, err := p.Log()
	return err == nil && strings.Contains(text, s)
}
