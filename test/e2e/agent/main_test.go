//go:build e2e

// Package agent_test runs the real agent binary, one process per simulated
// node, against the real control plane of the test harness.
package agent_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// testArgs are what every test agent adds to the harness wiring: short
// periods and debug logs.
var testArgs = []string{"--check-period=1s", "--check-timeout=1s", "--initial-backoff=100ms", "--log-level=debug"}

// baseArgs are the flags every test agent runs with: the harness wiring of
// AgentArgs plus testArgs.
func baseArgs(node harness.Node, kubeconfig string) []string {
	return append(cp.AgentArgs(node, kubeconfig), testArgs...)
}

// newNode creates a tainted node, deleted when the test ends.
func newNode(t *testing.T, name string, opts harness.NodeOptions) harness.Node {
	t.Helper()
	n, err := cp.CreateNode(t.Context(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", name, err)
		}
	})
	return n
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

func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// unhealthyTaint is the agent's default re-taint taint.
var unhealthyTaint = corev1.Taint{Key: "node-ready/unhealthy", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// tainted reports whether the node carries the startup or the unhealthy taint.
func tainted(n *corev1.Node) bool {
	return hasTaint(n, harness.StartupTaint) || hasTaint(n, unhealthyTaint)
}

func hasTaint(n *corev1.Node, taint corev1.Taint) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == taint.Key && t.Effect == taint.Effect
	})
}

// waitNode waits until cond holds for the node (harness.WaitNode).
func waitNode(t *testing.T, name string, timeout time.Duration, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	return cp.WaitNode(t, name, timeout, what, cond)
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

// eventReasons lists the reasons of the Events recorded on node.
func eventReasons(t *testing.T, node string) []string {
	t.Helper()
	// The core/v1 view of the same Events supports field selectors on the object.
	list, err := cp.Client.CoreV1().Events(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

func waitEvent(t *testing.T, node, reason string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if slices.Contains(eventReasons(t, node), reason) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no %s Event on node %s within %s; have %v", reason, node, timeout, eventReasons(t, node))
}

func logCount(p *harness.Process, s string) int {
	text, _ := p.Log()
	return strings.Count(text, s)
}

func logContains(p *harness.Process, s string) bool {
	text, err := p.Log()
	return err == nil && strings.Contains(text, s)
}
