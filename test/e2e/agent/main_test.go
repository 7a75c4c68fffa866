//go:build e2e

// Package agent_test runs the real agent binary, one process per simulated
// node, against the real control plane of the test harness.
package agent_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/agentenv"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const agentSA = agentenv.ServiceAccount

var cp *harness.ControlPlane

func TestMain(m *testing.M) {
	harness.MainWithControlPlane(m, harness.Options{AuditLog: true, Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		return agentenv.InstallRBAC(ctx, cp)
	})
}

// agent is one running agent process playing one node.
type agent struct {
	node harness.Node
	proc *harness.Process
	args []string
}

func (a *agent) url(path string) string { return "http://" + a.node.IP + ":8080" + path }

// baseArgs are the flags every test agent runs with: the harness wiring of
// agentenv.Args plus short periods and debug logs.
func baseArgs(node harness.Node, kubeconfig string) []string {
	return append(agentenv.Args(cp, node, kubeconfig),
		"--check-period=1s", "--check-timeout=1s", "--initial-backoff=100ms", "--log-level=debug")
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
	path, err := agentenv.Kubeconfig(t.Context(), cp, sa, node)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startAgent runs the real agent binary for node, stopped when the test ends.
func startAgent(t *testing.T, node harness.Node, extra ...string) *agent {
	t.Helper()
	a := &agent{node: node, args: append(baseArgs(node, nodeKubeconfig(t, agentSA, node)), extra...)}
	a.start(t)
	t.Cleanup(func() {
		if err := a.proc.Stop(5 * time.Second); err != nil {
			t.Errorf("stop agent %s: %v", node.Name, err)
		}
		if t.Failed() {
			t.Logf("agent %s log:\n%s", node.Name, a.proc.Tail(30))
		}
	})
	return a
}

func (a *agent) start(t *testing.T) {
	t.Helper()
	p, err := agentenv.Start(cp, a.node, a.args)
	if err != nil {
		t.Fatal(err)
	}
	a.proc = p
}

func agentBinary(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return agentenv.Binary(root)
}

// publishPeers writes the agents' headless Service EndpointSlice.
func publishPeers(t *testing.T, nodes ...harness.Node) {
	t.Helper()
	if err := agentenv.PublishPeers(t.Context(), cp, nodes...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.DiscoveryV1().EndpointSlices(agentenv.Namespace).Delete(context.Background(), agentenv.PeerService, metav1.DeleteOptions{})
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

// waitNode waits until cond holds for the node.
func waitNode(t *testing.T, name string, timeout time.Duration, what string, cond func(*corev1.Node) bool) {
	t.Helper()
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		return cond(n), nil
	})
	if err != nil {
		t.Fatalf("node %s: %s not reached within %s; taints=%v labels=%v", name, what, timeout, last.Spec.Taints, last.Labels)
	}
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
	b, _ := os.ReadFile(p.LogPath)
	return strings.Count(string(b), s)
}

func logContains(p *harness.Process, s string) bool {
	b, err := os.ReadFile(p.LogPath)
	return err == nil && strings.Contains(string(b), s)
}
