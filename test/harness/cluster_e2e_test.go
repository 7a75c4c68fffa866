//go:build e2e

package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRealCluster brings up real nodes and checks what the install tests
// stand on: every node registered by its kubelet with the startup taint and
// Ready, CoreDNS running as pods on them and answering at its pod IPs from
// the harness namespace, a node added later, and nothing left behind.
func TestRealCluster(t *testing.T) {
	start := time.Now()
	c := StartClusterT(t, ClusterOptions{})
	t.Logf("cluster with %d real nodes and CoreDNS ready in %s", len(c.Nodes), time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, n := range c.Nodes {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasTaint(node, StartupTaint) {
			t.Errorf("node %s: taints %v, want the startup taint registered by its kubelet", n.Name, node.Spec.Taints)
		}
		if node.Spec.PodCIDR == "" || node.Status.Addresses[0].Address != n.IP {
			t.Errorf("node %s: podCIDR %q addresses %v", n.Name, node.Spec.PodCIDR, node.Status.Addresses)
		}
	}
	pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	client := &dns.Client{Timeout: time.Second}
	for _, p := range pods.Items {
		ips, err := LookupA(client, p.Status.PodIP+":53", ExternalName)
		if err != nil || len(ips) != 1 || ips[0] != ExternalIP {
			t.Errorf("CoreDNS pod %s on %s (%s): %v %v", p.Name, p.Spec.NodeName, p.Status.PodIP, ips, err)
		}
	}

	joined := time.Now()
	n3, err := c.AddNode(ctx, RealNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("third node %s Ready %s after its start", n3.Name, time.Since(joined).Round(time.Millisecond))
	out, err := n3.Exec(ctx, "ip", "-4", "addr", "show", "eth0")
	if err != nil || !strings.Contains(out, n3.IP) {
		t.Errorf("node %s eth0: %v %s", n3.Name, err, out)
	}

	cgroup := filepath.Join("/sys/fs/cgroup/memory", n3.cgroupRoot())
	if _, err := os.Stat(cgroup); err != nil {
		t.Errorf("node cgroup root: %v", err)
	}
	c.Stop()
	if _, err := os.Stat(cgroup); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left after Stop: %v", cgroup, err)
	}
	if out, _ := exec.Command("ip", "link", "show", n3.hostLink).CombinedOutput(); !strings.Contains(string(out), "does not exist") {
		t.Errorf("link %s left after Stop: %s", n3.hostLink, out)
	}
}

func hasTaint(n *corev1.Node, want corev1.Taint) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == want.Key && t.Effect == want.Effect {
			return true
		}
	}
	return false
}
