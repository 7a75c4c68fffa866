//go:build e2e

package agentipv6_test

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/e2e/agentkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestNodesVerifyOnIPv6: on an IPv6 single-stack plane, with nothing set
// for IPv6, agents verify their nodes as on IPv4: the dns and discovery
// checks ask for AAAA records (--ip-families=auto found the plane's IPv6
// Service CIDR), the network check reaches the kubernetes Service and the
// peers at IPv6 addresses, and the metrics are served on an IPv6 address.
func TestNodesVerifyOnIPv6(t *testing.T) {
	agents := kit.ThreeNodesVerifiedWithEventsAndMetrics(t, "verify6")
	for _, a := range agents {
		if ip, err := netip.ParseAddr(a.Node.IP); err != nil || !ip.Is6() {
			t.Fatalf("node %s has address %q, want IPv6", a.Node.Name, a.Node.IP)
		}
		if text := a.LogT(t); !strings.Contains(text, `"msg":"IP families of the cluster's Service CIDRs"`) || !strings.Contains(text, `"ip_families":"ipv6"`) {
			t.Errorf("agent %s did not take ipv6 from the cluster's Service CIDRs:\n%s", a.Node.Name, a.Tail(20))
		}
		// Every peer (the other agents, CoreDNS) answered at its IPv6 address.
		if _, m := agentkit.HTTPGet(t, a.URL("/metrics")); !strings.Contains(m, `node_check_failures_total{check="network"} 0`) {
			t.Errorf("agent %s: the network check failed on the way", a.Node.Name)
		}
	}
}

// TestCheckAsksForTheClusterFamilies: the plane's names have AAAA records
// only, so the same round passes with the families the agent finds and
// fails, naming the missing A record, when --ip-families=ipv4 forces them.
func TestCheckAsksForTheClusterFamilies(t *testing.T) {
	node := kit.CP.NewNode(t, "families6", harness.NodeOptions{})
	check := func(extra ...string) (string, error) {
		args := append(append([]string{"check", "--checks=dns,discovery"}, kit.BaseArgs(node, kit.NodeKubeconfig(t, harness.AgentServiceAccount, node))...), extra...)
		out, err := exec.CommandContext(t.Context(), harness.BuiltBinary(t, harness.AgentBinary), args...).CombinedOutput()
		return string(out), err
	}
	if out, err := check(); err != nil || !strings.Contains(out, "all checks passed") {
		t.Errorf("check with --ip-families=auto: %v\n%s", err, out)
	}
	out, err := check("--ip-families=ipv4")
	if err == nil || !strings.Contains(out, "no A record") {
		t.Errorf("check with --ip-families=ipv4 on an IPv6 plane: err=%v, want a failure naming no A record:\n%s", err, out)
	}
}

// TestBrokenNodeRetaintedOnIPv6: a verified node whose resolver (an IPv6
// nameserver) stops answering is re-tainted with the unhealthy taint, and
// verified again once it answers.
func TestBrokenNodeRetaintedOnIPv6(t *testing.T) {
	node := kit.CP.NewNode(t, "broken6", harness.NodeOptions{})
	good, err := os.ReadFile(kit.CP.ResolvConf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(good), "nameserver "+kit.CP.Primary().DNSServiceIP) {
		t.Fatalf("the plane's resolv.conf does not name kube-dns's IPv6 ClusterIP %s:\n%s", kit.CP.Primary().DNSServiceIP, good)
	}
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, good, 0o644); err != nil {
		t.Fatal(err)
	}
	a := kit.StartAgent(t, node, "--check.dns.resolv-conf="+resolv, "--fleet-budget=100%")
	kit.CP.WaitNode(t, node.Name, 20*time.Second, "verified", agentkit.Verified)

	// An address of the plane's IPv6 range (harness.ClusterNet6) where
	// nothing answers, as 10.213.0.250 is in IPv4.
	const dead = "fd00:10:213::fa"
	if err := os.WriteFile(resolv, []byte("nameserver "+dead+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kit.CP.WaitNode(t, node.Name, 20*time.Second, "re-tainted as unhealthy", func(n *corev1.Node) bool {
		return agentkit.HasTaint(n, agentkit.UnhealthyTaint) && n.Labels["node-ready/verified"] == "false"
	})
	kit.CP.WaitEvent(t, 5*time.Second, "Node", node.Name, api.EventNodeRetainted, "")
	if text := a.LogT(t); !strings.Contains(text, "["+dead+"]:53") {
		t.Errorf("the agent's log does not name the dead IPv6 resolver [%s]:53:\n%s", dead, a.Tail(20))
	}

	if err := os.WriteFile(resolv, good, 0o644); err != nil {
		t.Fatal(err)
	}
	kit.CP.WaitNode(t, node.Name, 20*time.Second, "verified again", agentkit.Verified)
}

// TestFleetBudgetHoldsOnIPv6: cluster DNS down on the IPv6 plane re-taints
// no more nodes than the fleet budget allows, and every node recovers.
func TestFleetBudgetHoldsOnIPv6(t *testing.T) {
	kit.RetaintWithinFleetBudgetAndRecovery(t, "fleet6")
}
