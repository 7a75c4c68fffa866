//go:build e2e

// Package agentkit runs the real agent binary, one process per simulated
// node, on a control plane of the test harness: the helpers and scenarios
// the agent e2e packages share (test/e2e/agent on IPv4, test/e2e/agentipv6
// on an IPv6 single-stack plane), so each scenario is written once.
package agentkit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// Kit runs agents on one control plane.
type Kit struct {
	// CP is the control plane the agents and their nodes live on.
	CP *harness.ControlPlane
}

// Agent is one running agent process playing one node.
type Agent struct {
	*harness.Daemon
	// Node is the node the agent verifies.
	Node harness.Node
}

// Iterations counts an agent's loop iterations: rounds of checks, and
// looks at a node that is bypassed or waits for a taint. Tests that assert
// an agent did not do something anchor on it having iterated meanwhile.
var Iterations = harness.Counter{Name: "node_ready_loop_iterations_total"}

// Looped waits until the agent's loop has run n more times, hold (when not
// nil) holding all along (harness.WaitCounter).
func (a *Agent) Looped(t *testing.T, n int, what string, hold func() (bool, string)) {
	t.Helper()
	a.WaitCounter(t, Iterations, n, what, hold)
}

// NodeHolds is a hold for Looped: cond holds for the node named name, as
// want describes it.
func (k Kit) NodeHolds(t *testing.T, name, want string, cond func(*corev1.Node) bool) func() (bool, string) {
	return func() (bool, string) {
		n := k.CP.GetNode(t, name)
		return cond(n), fmt.Sprintf("node %s is not %s: taints %v, labels %v", name, want, n.Spec.Taints, n.Labels)
	}
}

// TestArgs are what every test agent adds to the harness wiring: short
// periods and debug logs.
var TestArgs = []string{"--check-period=1s", "--check-timeout=1s", "--initial-backoff=100ms", "--log-level=debug"}

// BaseArgs are the flags every test agent runs with: the harness wiring of
// AgentArgs plus TestArgs.
func (k Kit) BaseArgs(node harness.Node, kubeconfig string) []string {
	return append(k.CP.AgentArgs(node, kubeconfig), TestArgs...)
}

// NodeKubeconfig writes a kubeconfig whose token is bound to a pod on node.
func (k Kit) NodeKubeconfig(t *testing.T, sa string, node harness.Node) string {
	t.Helper()
	path, err := k.CP.NodeKubeconfig(t.Context(), harness.AgentNamespace, sa, node)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// StartAgent runs the real agent binary for node, stopped when the test ends.
func (k Kit) StartAgent(t *testing.T, node harness.Node, extra ...string) *Agent {
	t.Helper()
	return &Agent{Daemon: k.CP.StartAgent(t, node, slices.Concat(TestArgs, extra)...), Node: node}
}

// StartFleet creates count nodes named prefix-0, prefix-1, ..., publishes
// them as each other's peers and runs an agent on each with extra flags.
func (k Kit) StartFleet(t *testing.T, prefix string, count int, extra ...string) []*Agent {
	t.Helper()
	var nodes []harness.Node
	for i := range count {
		nodes = append(nodes, k.CP.NewNode(t, fmt.Sprintf("%s-%d", prefix, i), harness.NodeOptions{}))
	}
	k.PublishPeers(t, nodes...)
	var agents []*Agent
	for _, n := range nodes {
		agents = append(agents, k.StartAgent(t, n, extra...))
	}
	return agents
}

// Daemons are the agents' processes, for harness.WaitCounters.
func Daemons(agents []*Agent) []*harness.Daemon {
	var out []*harness.Daemon
	for _, a := range agents {
		out = append(out, a.Daemon)
	}
	return out
}

// PublishPeers writes the agents' headless Service EndpointSlices (per
// address family, as harness.PublishAgentPeers names them), deleted when
// the test ends.
func (k Kit) PublishPeers(t *testing.T, nodes ...harness.Node) {
	t.Helper()
	if err := k.CP.PublishAgentPeers(t.Context(), nodes...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + harness.AgentPeerService}
		_ = k.CP.Client.DiscoveryV1().EndpointSlices(harness.AgentNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{}, sel)
	})
}

// ListNodes lists every node of the cluster.
func (k Kit) ListNodes(t *testing.T) []corev1.Node {
	t.Helper()
	l, err := k.CP.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// Retainted counts the nodes the agents re-tainted (tainted and labelled
// verified=false).
func (k Kit) Retainted(t *testing.T) int {
	n := 0
	for _, node := range k.ListNodes(t) {
		if Tainted(&node) && node.Labels["node-ready/verified"] == "false" {
			n++
		}
	}
	return n
}

// UnhealthyTaint is the agent's default re-taint taint (the default preset's).
var UnhealthyTaint = harness.UnhealthyTaint

// Tainted reports whether the node carries the startup or the unhealthy taint.
func Tainted(n *corev1.Node) bool {
	return HasTaint(n, harness.StartupTaint) || HasTaint(n, UnhealthyTaint)
}

// HasTaint reports whether n carries taint (key and effect).
func HasTaint(n *corev1.Node, taint corev1.Taint) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == taint.Key && t.Effect == taint.Effect
	})
}

// Verified reports whether n is untainted and labelled verified.
func Verified(n *corev1.Node) bool { return !Tainted(n) && n.Labels["node-ready/verified"] == "true" }

// HTTPGet returns status and body of url.
func HTTPGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Main runs a package's tests on one control plane started with opts, the
// chart's agent RBAC applied, k set to it: the TestMain of an agent e2e
// package whose tests need nothing else.
func Main(m *testing.M, opts harness.Options, k *Kit) {
	harness.MainWithControlPlane(m, opts, func(ctx context.Context, c *harness.ControlPlane) error {
		*k = Kit{CP: c}
		return c.ApplyChartRBAC(ctx, harness.AgentNamespace)
	})
}
