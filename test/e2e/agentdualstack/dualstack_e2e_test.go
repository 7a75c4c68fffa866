//go:build e2e

package agentdualstack_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestNodesVerifyOnDualStack: with nothing set, the agents find both
// families in the cluster's Service CIDRs, the primary (IPv6) first, and
// verify their nodes, though
// kubernetes.default, a single-stack Service, resolves in one family only:
// a name passes when it resolves in any family the cluster uses.
func TestNodesVerifyOnDualStack(t *testing.T) {
	for _, a := range kit.ThreeNodesVerifiedWithEventsAndMetrics(t, "verify-dual") {
		if text := a.LogT(t); !strings.Contains(text, `"ip_families":"ipv6,ipv4"`) {
			t.Errorf("agent %s did not take both families, primary first, from the cluster's Service CIDRs:\n%s", a.Node.Name, a.Tail(20))
		}
		if len(a.Node.IPs) != 2 {
			t.Errorf("node %s has addresses %v, want one per family", a.Node.Name, a.Node.IPs)
		}
	}
	// Requiring the secondary family alone fails: kubernetes.default has
	// no A record, its Service being IPv6 (the primary family) only.
	node := kit.CP.NewNode(t, "families-dual", harness.NodeOptions{})
	args := append([]string{"check", "--checks=dns", "--ip-families=ipv4"}, kit.BaseArgs(node, kit.NodeKubeconfig(t, harness.AgentServiceAccount, node))...)
	out, err := exec.CommandContext(t.Context(), harness.BuiltBinary(t, harness.AgentBinary), args...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no A record") {
		t.Errorf("check with --ip-families=ipv4: err=%v, want a failure naming no A record:\n%s", err, out)
	}
}
