//go:build e2e

// Package faults_test installs the chart with the real helm on a cluster of
// three real nodes and puts one node at a time through the faults machines
// meet: the kubelet restarted, containerd killed and restarted, the agent
// killed (as by the OOM killer), the node rebooted, cut off from the API
// server, and its pod network cut. Each scenario is bounded and anchored on
// the agents' round counters: no node gets a taint of ours it should not,
// the faulted node ends verified, and the time to recover is logged
// ("figure:" lines).
package faults_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	namespace     = "kube-node-ready"
	verifiedLabel = "node-ready/verified"

	// The agents' timing in these installs: short, so that a re-taint and a
	// recovery each take seconds.
	checkPeriod      = 2 * time.Second
	retaintThreshold = 3
	// graceperiod is kube-controller-manager's node monitor grace period
	// here: a node silent that long is Unknown and tainted unreachable.
	gracePeriod = 20 * time.Second
)

// unhealthyKey is the chart's default re-taint: the default preset's.
var unhealthyKey = harness.UnhealthyTaint.Key

var (
	c     *harness.Cluster
	chart string
)

func TestMain(m *testing.M) {
	root, err := harness.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	chart = filepath.Join(root, "charts", "kube-node-ready")
	// Three nodes, so that every node has a peer besides the faulted one.
	harness.MainWithCluster(m, harness.ClusterOptions{
		Options: harness.Options{Logf: log.Printf}, Nodes: 3, ProjectImages: true, NodeMonitorGracePeriod: gracePeriod,
	}, func(_ context.Context, cluster *harness.Cluster) error { c = cluster; return nil })
}

// TestFaultsOnRealNodes runs the scenarios one after the other on one
// cluster and one install: each starts and ends with every node verified.
func TestFaultsOnRealNodes(t *testing.T) {
	start := time.Now()
	install(t)
	taints := watchTaints(t)
	steps := []struct {
		name string
		run  func(*testing.T, *taintLog)
	}{
		{"kubelet-restart", testKubeletRestart},
		{"containerd-restart", testContainerdRestart},
		{"agent-killed", testAgentKilled},
		{"pod-network-cut", testPodNetworkCut},
		{"api-server-cut", testAPIServerCut},
		{"reboot", testReboot},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, taints) }) {
			t.Fatalf("step %s failed; later steps need every node verified", s.name)
		}
	}
	t.Logf("figure: install and every scenario took %s", time.Since(start).Round(time.Second))
}

// install runs helm install with short periods and waits until every node
// is verified.
func install(t *testing.T) {
	v, err := c.LocalImageValues(fmt.Sprintf("checkPeriod: %s\nretaintThreshold: %d\nrecoverThreshold: 2\nnetwork: {peerRefresh: 10s}",
		checkPeriod, retaintThreshold), "")
	if err != nil {
		t.Fatal(err)
	}
	vals := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vals, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Helm(t.Context(), "install", harness.ChartRelease, chart, "--namespace", namespace, "--create-namespace",
		"--values", vals, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	waitVerified(t, 2*time.Minute, c.Nodes...)
	t.Logf("helm install -> every node verified in %s", time.Since(start).Round(time.Millisecond))
}

// ours lists the taints of ours on n.
func ours(n *corev1.Node) []string {
	var ts []string
	for _, t := range n.Spec.Taints {
		if harness.OurTaint(t.Key) {
			ts = append(ts, t.ToString())
		}
	}
	return ts
}

// waitVerified waits until every one of nodes carries no taint of ours and
// the verified label.
func waitVerified(t *testing.T, timeout time.Duration, nodes ...*harness.RealNode) {
	t.Helper()
	for _, n := range nodes {
		c.WaitNode(t, n.Name, timeout, "verified", func(node *corev1.Node) bool {
			return len(ours(node)) == 0 && node.Labels[verifiedLabel] == "true"
		})
	}
}

// agentPod returns the agent pod on node once it is Running and Ready.
func agentPod(t *testing.T, node *harness.RealNode, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	harness.Eventually(t, timeout, "agent pod Ready on "+node.Name, func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{
			LabelSelector: "app=kube-node-ready", FieldSelector: "spec.nodeName=" + node.Name,
		})
		if err != nil {
			return false, err.Error()
		}
		for i, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && harness.PodReady(&p) {
				pod = &pods.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d agent pods, none Ready", len(pods.Items))
	})
	return pod
}

// metric reads one of the agent's metrics from pod.
func metric(pod *corev1.Pod, name string, match ...string) (float64, error) {
	return harness.ScrapeMetric("http://"+net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(harness.MetricsPort))+"/metrics", name, match...)
}

// mustMetric is metric for a pod that must answer.
func mustMetric(t *testing.T, pod *corev1.Pod, name string, match ...string) float64 {
	t.Helper()
	v, err := metric(pod, name, match...)
	if err != nil {
		t.Fatalf("agent on %s: %v", pod.Spec.NodeName, err)
	}
	return v
}

// rounds is how many rounds pod's agent has run: its api check runs in
// every round, counted or not.
func rounds(pod *corev1.Pod) (float64, error) {
	return metric(pod, "node_check_duration_seconds_count", `check="api"`)
}

// waitRounds waits until the agent in each of pods has run n more rounds
// than it had when called: the positive signal every "nothing happened"
// below is anchored on.
func waitRounds(t *testing.T, n int, pods ...*corev1.Pod) {
	t.Helper()
	base := make([]float64, len(pods))
	for i, pod := range pods {
		harness.Eventually(t, 30*time.Second, "rounds of the agent on "+pod.Spec.NodeName, func() (bool, string) {
			var err error
			base[i], err = rounds(pod)
			return err == nil, fmt.Sprint(err)
		})
	}
	// Rounds come every period (±10 %) after the last one ended, and a
	// failing one can wait for its checks' timeouts.
	timeout := time.Duration(n+2) * (checkPeriod*11/10 + 3*time.Second)
	harness.Eventually(t, timeout, fmt.Sprintf("%d rounds of every agent", n), func() (bool, string) {
		for i, pod := range pods {
			r, err := rounds(pod)
			if err != nil {
				return false, err.Error()
			}
			if r < base[i]+float64(n) {
				return false, fmt.Sprintf("agent on %s: %v rounds", pod.Spec.NodeName, r-base[i])
			}
		}
		return true, ""
	})
}

// waitRoundsEverywhere waits until every agent but the one on skip has run
// n more rounds.
func waitRoundsEverywhere(t *testing.T, n int, skip *harness.RealNode) {
	t.Helper()
	var pods []*corev1.Pod
	for _, node := range c.Nodes {
		if node != skip {
			pods = append(pods, agentPod(t, node, 30*time.Second))
		}
	}
	waitRounds(t, n, pods...)
}

// nodeWithoutDNS is a node that runs no CoreDNS pod. A fault of a node
// that runs one is also an outage of part of the cluster's DNS (which the
// install test covers), and with the periods shortened thirtyfold here the
// other nodes would judge it before kube-controller-manager takes the pod
// out of the kube-dns Service, which at the default periods it does first.
func nodeWithoutDNS(t *testing.T) *harness.RealNode {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods("kube-system").List(t.Context(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	var busy []string
	for _, p := range pods.Items {
		busy = append(busy, p.Spec.NodeName)
	}
	for _, n := range slices.Backward(c.Nodes) {
		if !slices.Contains(busy, n.Name) {
			return n
		}
	}
	t.Fatalf("every node runs a CoreDNS pod (%v)", busy)
	return nil
}

// figure logs a measured duration for docs/benchmarks.md.
func figure(t *testing.T, what string, d time.Duration) {
	t.Helper()
	t.Logf("figure: %s: %s", what, d.Round(100*time.Millisecond))
}
