//go:build e2e

package installipv6_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const namespace = "kube-node-ready"

// TestChartOnIPv6Nodes: the chart on real nodes in IPv6 single-stack.
func TestChartOnIPv6Nodes(t *testing.T) {
	chartOnFamilies(t, corev1.IPv6Protocol)
}

// TestChartOnDualStackNodes: the chart on real nodes in dual-stack, IPv4
// primary (the kubernetes Service IPv4, kube-dns and pods in both).
func TestChartOnDualStackNodes(t *testing.T) {
	chartOnFamilies(t, corev1.IPv4Protocol, corev1.IPv6Protocol)
}

// chartOnFamilies starts two real nodes in families, installs the chart
// with the local images and nothing about families set, and runs the steps
// in order (each builds on the one before).
func chartOnFamilies(t *testing.T, families ...corev1.IPFamily) {
	c := harness.StartClusterT(t, harness.ClusterOptions{Options: harness.Options{IPFamilies: families}, ProjectImages: true})
	chart, err := harness.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.LocalImageValues("checkPeriod: 2s", "")
	if err != nil {
		t.Fatal(err)
	}
	vals := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vals, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"install", func(t *testing.T) {
			start := time.Now()
			c.HelmT(t, "install", harness.ChartRelease, chart, "--namespace", namespace, "--create-namespace", "--values", vals, "--wait", "--timeout", "3m")
			harness.Eventually(t, 2*time.Minute, "real nodes verified", func() (bool, string) { return verified(t, c, realNodeNames(c)...) })
			t.Logf("every real node verified %s after helm install started", time.Since(start).Round(time.Millisecond))
		}},
		{"agents-verify-in-every-family", func(t *testing.T) { agentsVerify(t, c) }},
		{"join", func(t *testing.T) { join(t, c) }},
		{"delete-node", func(t *testing.T) { deleteNode(t, c) }},
		{"uninstall", func(t *testing.T) {
			c.HelmT(t, "uninstall", harness.ChartRelease, "--namespace", namespace, "--wait", "--timeout", "3m")
			nodes, err := c.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes.Items {
				if slices.Contains(n.Finalizers, api.Finalizer) {
					t.Errorf("node %s still has %s after uninstall", n.Name, api.Finalizer)
				}
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.Fatalf("step %s failed; later steps build on it", s.name)
		}
	}
}

// agentsVerify: every real node's agent pod has an address in each family
// and serves its metrics at each of them, and says its node is verified
// with every check passing (dns and discovery in the cluster's families,
// network to the kubernetes Service and to peers of the primary family).
func agentsVerify(t *testing.T, c *harness.Cluster) {
	pods, err := c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app=kube-node-ready"})
	if err != nil {
		t.Fatal(err)
	}
	onNode := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			onNode[p.Spec.NodeName] = p
		}
	}
	for _, n := range c.Nodes {
		p, ok := onNode[n.Name]
		if !ok {
			t.Fatalf("no Running agent pod on %s", n.Name)
		}
		if len(p.Status.PodIPs) != len(c.Families) {
			t.Errorf("agent pod %s: pod IPs %v, want one per family", p.Name, p.Status.PodIPs)
		}
		for _, ip := range p.Status.PodIPs {
			url := "http://" + net.JoinHostPort(ip.IP, fmt.Sprint(harness.MetricsPort)) + "/metrics"
			if v, err := harness.ScrapeMetric(url, "node_ready_verified"); err != nil || v != 1 {
				t.Errorf("agent on %s at %s: node_ready_verified = %v, %v", n.Name, ip.IP, v, err)
			}
			for _, check := range []string{"dns", "discovery", "network", "api"} {
				if v, err := harness.ScrapeMetric(url, "node_check_success", `check="`+check+`"`); err != nil || v != 1 {
					t.Errorf("agent on %s at %s: node_check_success{check=%q} = %v, %v", n.Name, ip.IP, check, v, err)
				}
			}
		}
	}
}

// join: a node that joins gets the finalizer from admission on creation and
// is verified; the time from its creation to its startup taint gone is
// logged.
func join(t *testing.T, c *harness.Cluster) {
	ctx := t.Context()
	n, err := c.AddNode(ctx, harness.RealNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := c.GetNode(t, n.Name)
	if !slices.Contains(node.Finalizers, api.Finalizer) {
		t.Errorf("joined node %s has finalizers %v, want %s from admission", n.Name, node.Finalizers, api.Finalizer)
	}
	harness.Eventually(t, 2*time.Minute, "joined node verified", func() (bool, string) { return verified(t, c, n.Name) })
	t.Logf("node %s (%s) verified %s after its creation", n.Name, strings.Join(n.IPs, ","), time.Since(node.CreationTimestamp.Time).Round(time.Second))
}

// deleteNode: a deleted real node goes once the webhook's cleanup has
// completed (its Event says so), not before.
func deleteNode(t *testing.T, c *harness.Cluster) {
	victim := c.Nodes[len(c.Nodes)-1]
	if n := c.GetNode(t, victim.Name); !slices.Contains(n.Finalizers, api.Finalizer) {
		t.Fatalf("node %s has no finalizer: %v", victim.Name, n.Finalizers)
	}
	if err := victim.Stop(); err != nil {
		t.Logf("stop %s: %v", victim.Name, err)
	}
	c.KubectlOK(t, "", "delete", "node", victim.Name, "--wait=false")
	c.WaitNodeGone(t, victim.Name, time.Minute)
	// The Event is written before the finalizer is removed, by a recorder
	// that sends it in the background.
	c.WaitEvent(t, 30*time.Second, "Node", victim.Name, api.EventCleanupCompleted, "")
}

func realNodeNames(c *harness.Cluster) []string {
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// verified reports whether every named node is untainted (neither of the
// project's taints) and labelled verified, and which are not.
func verified(t *testing.T, c *harness.Cluster, names ...string) (bool, string) {
	var notYet []string
	for _, name := range names {
		n, err := c.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == harness.StartupTaint.Key || t.Key == harness.UnhealthyTaint.Key
		})
		if tainted || n.Labels[api.VerifiedLabel] != "true" {
			notYet = append(notYet, fmt.Sprintf("%s (taints %v, labels %v)", name, n.Spec.Taints, n.Labels))
		}
	}
	return len(notYet) == 0, "not verified: " + strings.Join(notYet, ", ")
}
