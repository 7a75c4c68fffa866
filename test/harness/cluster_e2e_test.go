//go:build e2e

package harness

import (
	"context"
	"net"
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
		ips, err := LookupA(client, net.JoinHostPort(p.Status.PodIP, "53"), ExternalName)
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

	stopLeavesNothing(t, c)
}

// stopLeavesNothing stops the cluster and checks that no node's cgroup
// root, link or pod route is left behind.
func stopLeavesNothing(t *testing.T, c *Cluster) {
	t.Helper()
	nodes := c.Nodes
	if t.Failed() {
		t.Logf("component logs:\n%s", c.Logs(40))
	}
	for _, n := range nodes {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", n.cgroupRoot())); err != nil {
			t.Errorf("node %s cgroup root: %v", n.Name, err)
		}
	}
	c.Stop()
	for _, n := range nodes {
		cgroup := filepath.Join("/sys/fs/cgroup/memory", n.cgroupRoot())
		if _, err := os.Stat(cgroup); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left after Stop: %v", cgroup, err)
		}
		if out, _ := exec.Command("ip", "link", "show", n.hostLink).CombinedOutput(); !strings.Contains(string(out), "does not exist") {
			t.Errorf("link %s left after Stop: %s", n.hostLink, out)
		}
		for _, cidr := range n.PodCIDRs {
			if out, _ := exec.Command("ip", "route", "show", cidr).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
				t.Errorf("route to %s left after Stop: %s", cidr, out)
			}
		}
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

// TestRealClusterIPFamilies brings up real nodes in IPv6 single-stack and
// in dual-stack and checks what the install tests on them stand on: each
// node's InternalIPs and pod ranges in every family, CoreDNS pods (one per
// node) answering A and AAAA at their pod IPs of each family from the
// harness namespace (so pod traffic is routed between the namespaces in
// each family), kube-proxy's rules for the kube-dns Service in ip6tables on
// the nodes, the pod partition and API server cut faults in ip6tables, and
// nothing left behind.
func TestRealClusterIPFamilies(t *testing.T) {
	for _, tc := range familyCases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c := StartClusterT(t, ClusterOptions{Options: Options{IPFamilies: tc.families}})
			t.Logf("%s cluster with %d real nodes and CoreDNS ready in %s", tc.name, len(c.Nodes), time.Since(start).Round(time.Millisecond))
			checkRealFamilies(t, c)
			stopLeavesNothing(t, c)
		})
	}
}

func checkRealFamilies(t *testing.T, c *Cluster) {
	ctx := t.Context()
	for _, n := range c.Nodes {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var internal []string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if strings.Join(internal, ",") != strings.Join(n.IPs, ",") || len(node.Spec.PodCIDRs) != len(c.Families) {
			t.Errorf("node %s: InternalIPs %v podCIDRs %v, want %v and one range per family", n.Name, internal, node.Spec.PodCIDRs, n.IPs)
		}
		for i, cidr := range node.Spec.PodCIDRs {
			if got := AddressType(strings.SplitN(cidr, "/", 2)[0]); string(got) != string(c.Families[i].Family) {
				t.Errorf("node %s: pod range %s is not %s", n.Name, cidr, c.Families[i].Family)
			}
		}
		if hasIPv6(c.Families) {
			Eventually(t, 30*time.Second, "kube-proxy's ip6tables rule for the kube-dns Service "+DNSServiceIP6+" on "+n.Name, func() (bool, string) {
				out, err := n.Exec(ctx, "ip6tables", "-w", "-t", "nat", "-S", "KUBE-SERVICES")
				return err == nil && strings.Contains(out, DNSServiceIP6), out
			})
		}
	}
	pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	client := &dns.Client{Timeout: time.Second}
	for _, p := range pods.Items {
		if len(p.Status.PodIPs) != len(c.Families) {
			t.Errorf("CoreDNS pod %s: pod IPs %v, want one per family", p.Name, p.Status.PodIPs)
		}
		for i, ip := range p.Status.PodIPs {
			a := c.Families[i]
			ips, err := Lookup(client, hostPort(ip.IP, 53), ExternalName, a.Family)
			if err != nil || len(ips) != 1 || ips[0] != a.ExternalIP {
				t.Errorf("CoreDNS pod %s on %s at %s: %s lookup = %v, %v; want [%s]", p.Name, p.Spec.NodeName, ip.IP, a.Family, ips, err, a.ExternalIP)
			}
		}
	}

	n := c.Nodes[0]
	if err := n.PartitionPods(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("ip6tables", "-w", "-S", "FORWARD").CombinedOutput(); !strings.Contains(string(out), n.PodCIDRs[len(n.PodCIDRs)-1]) {
		t.Errorf("PartitionPods added no ip6tables rule for %s:\n%s", n.PodCIDRs, out)
	}
	if err := n.HealPods(ctx); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		if out, _ := exec.Command(bin, "-w", "-S", "FORWARD").CombinedOutput(); strings.Contains(string(out), "knr-fault") {
			t.Errorf("%s rules left after HealPods:\n%s", bin, out)
		}
	}

	if err := n.CutAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := n.Exec(ctx, "ip6tables", "-w", "-S", "OUTPUT"); err != nil || !strings.Contains(out, APIServerIP6) {
		t.Errorf("CutAPIServer added no ip6tables rule for %s on %s: %v\n%s", APIServerIP6, n.Name, err, out)
	}
	if err := n.ReconnectAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		if out, err := n.Exec(ctx, bin, "-w", "-S"); err != nil || strings.Contains(out, "knr-fault") {
			t.Errorf("%s rules on %s after ReconnectAPIServer: %v\n%s", bin, n.Name, err, out)
		}
	}
}
