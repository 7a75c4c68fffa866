//go:build e2e

package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestAPIServerRestartRetaintsNothing restarts kube-apiserver (same etcd,
// down 12 s) under agents checking every second. Rounds during the outage
// and while the new server warms up are not the nodes' failures: no node is
// re-tainted, though every agent saw failing rounds.
func TestAPIServerRestartRetaintsNothing(t *testing.T) {
	var nodes []harness.Node
	for i := range 3 {
		nodes = append(nodes, newNode(t, fmt.Sprintf("restart-%d", i), harness.NodeOptions{}))
	}
	publishPeers(t, nodes...)
	var agents []*agent
	for _, n := range nodes {
		agents = append(agents, startAgent(t, n, "--fleet-budget=100%"))
	}
	for _, n := range nodes {
		waitNode(t, n.Name, 20*time.Second, "verified", verified)
	}
	if err := cp.RestartAPIServer(t.Context(), 12*time.Second); err != nil {
		t.Fatal(err)
	}
	// Every round now would pass; give the agents time to make any mistake.
	time.Sleep(10 * time.Second)
	for _, a := range agents {
		if n := getNode(t, a.node.Name); !verified(n) {
			t.Errorf("node %s after the restart: taints %v, label %q", a.node.Name, n.Spec.Taints, n.Labels["node-ready/verified"])
		}
		if got := a.Metric(t, "node_ready_taint_operations_total", `operation="add"`, `result="success"`); got != 0 {
			t.Errorf("agent %s re-tainted its node %v times during the restart", a.node.Name, got)
		}
		if got := a.Metric(t, "node_ready_rounds_skipped_total"); got == 0 {
			t.Errorf("agent %s counted no round as a control-plane fault while the API server was down", a.node.Name)
		}
		if !logContains(a.Process, "control-plane fault") {
			t.Errorf("agent %s did not log the control-plane fault", a.node.Name)
		}
		if n := logCount(a.Process, "control-plane fault: failed rounds do not count"); n > 1 {
			t.Errorf("agent %s logged the fault %d times; once per outage is enough", a.node.Name, n)
		}
	}
}

// TestConditionGate: with --require-conditions the startup taint stays
// until the node reports the conditions, and the agent says why on the node;
// the change of condition untaints at once, not at the next backoff step.
func TestConditionGate(t *testing.T) {
	n := newNode(t, "cond-gate", harness.NodeOptions{})
	setConditions(t, n.Name, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
	a := startAgent(t, n, "--require-conditions=Ready=True,NetworkUnavailable=False", "--require-conditions.absent=pass",
		"--initial-backoff=1s", "--initial-tries=3", "--check-period=30s")
	waitNode(t, n.Name, 10*time.Second, "condition explains the wait", func(n *corev1.Node) bool {
		return strings.Contains(agentCondition(n).Message, "conditions")
	})
	time.Sleep(2 * time.Second)
	if !tainted(getNode(t, n.Name)) {
		t.Fatal("node untainted while Ready=False")
	}
	if c := agentCondition(getNode(t, n.Name)); c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "failing: conditions") {
		t.Errorf("KubeNodeReady = %s %s: %q, want False naming the conditions gate", c.Status, c.Reason, c.Message)
	}
	if !logContains(a.Process, "Ready is False, want True (KubeletNotReady)") {
		t.Error("agent log does not say which condition is unmet")
	}
	// The start-up backoff is now at 30 s: only the wake on the node's
	// change can untaint it this soon.
	time.Sleep(5 * time.Second)
	setConditions(t, n.Name, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"})
	waitNode(t, n.Name, 5*time.Second, "verified after Ready=True", verified)
}

// agentCondition returns the agent's KubeNodeReady condition of n.
func agentCondition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == "KubeNodeReady" {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// setConditions writes conditions into the node's status as the kubelet or
// node-problem-detector would (a strategic merge by type).
func setConditions(t *testing.T, node string, conds ...corev1.NodeCondition) {
	t.Helper()
	now := metav1.NewTime(time.Now())
	for i := range conds {
		conds[i].LastHeartbeatTime, conds[i].LastTransitionTime = now, now
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Nodes().Patch(t.Context(), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestProbeCheck: the probe check holds the startup taint while a
// configured health endpoint answers 503, names it on the node, and lets
// the node go once it answers 200.
func TestProbeCheck(t *testing.T) {
	var healthy atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "cni not ready", http.StatusServiceUnavailable)
		}
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	target := "http://" + ln.Addr().String() + "/healthz"

	n := newNode(t, "probe", harness.NodeOptions{})
	startAgent(t, n, "--checks=dns,api,probe", "--check.probe.targets="+target+"#status=200&timeout=500ms")
	waitNode(t, n.Name, 10*time.Second, "probe failure on the node", func(n *corev1.Node) bool {
		c := agentCondition(n)
		return strings.Contains(c.Message, "failing: probe")
	})
	if !tainted(getNode(t, n.Name)) {
		t.Fatal("node untainted while its probe target answers 503")
	}
	healthy.Store(true)
	waitNode(t, n.Name, 10*time.Second, "verified once the probe target answers 200", verified)
}
