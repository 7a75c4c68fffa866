//go:build e2e

package agentdualstack_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/agentkit"
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

// TestDualStackFleetEveryPeerAnswers: five agents on the dual-stack plane,
// each told to dial every peer it is given (--check.network.peers and
// --check.network.min-peers above their number), verify their nodes and keep
// passing the network check. The peers are what the chart's headless
// Service lists: the API server makes it single-stack in the cluster's
// primary family, so the endpointslice controller publishes each agent pod
// at its primary address only (a real agent listens on all of its
// addresses, --metrics-bind-address=:port). The harness publishes the
// simulated agents the same way, at the address each listens on. Before, it
// also published every agent's IPv4 address, where nothing listened: a
// round dialing one failed, and in a fleet of four or more, agents that
// drew only such peers failed the check for the harness's reason.
func TestDualStackFleetEveryPeerAnswers(t *testing.T) {
	chart, err := harness.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	svc := kit.CP.HelmT(t, "template", harness.ChartRelease, chart, "--namespace", harness.AgentNamespace, "--show-only", "templates/agent-service.yaml")
	// Under another name: the harness made the agents' Service as the
	// chart would, when it published their peers.
	svc = strings.Replace(svc, "\n  name: "+harness.AgentPeerService+"\n", "\n  name: "+harness.AgentPeerService+"-dry-run\n", 1)
	got := kit.CP.KubectlT(t, svc, "create", "--dry-run=server", "-f", "-", "-o", "jsonpath={.spec.ipFamilyPolicy} {.spec.ipFamilies}")
	if want := fmt.Sprintf(`SingleStack ["%s"]`, kit.CP.Primary().Family); got != want {
		t.Fatalf("the chart's agent Service on the dual-stack plane: %s, want %s (the harness publishes peers as its slices would list them)", got, want)
	}

	agents := kit.StartFleet(t, "peers-dual", 5, "--check.network.peers=20", "--check.network.min-peers=20")
	for _, a := range agents {
		kit.CP.WaitNode(t, a.Node.Name, 30*time.Second, "verified", agentkit.Verified)
	}
	failures := harness.Counter{Name: "node_check_failures_total", Match: []string{`check="network"`}}
	before := make([]float64, len(agents))
	for i, a := range agents {
		before[i] = scrape(t, a, failures)
	}
	harness.WaitCounters(t, agentkit.Daemons(agents), agentkit.Iterations, 3, "three rounds after every node verified", nil)
	for i, a := range agents {
		if after := scrape(t, a, failures); after != before[i] {
			t.Errorf("agent %s: %v failed network rounds after its node verified, want none:\n%s", a.Node.Name, after-before[i], a.Tail(20))
		}
		if ok := scrape(t, a, harness.Counter{Name: "node_check_success", Match: []string{`check="network"`}}); ok != 1 {
			t.Errorf("agent %s: node_check_success{check=\"network\"} = %v, want 1", a.Node.Name, ok)
		}
	}
}

// scrape reads counter c from a's metrics.
func scrape(t *testing.T, a *agentkit.Agent, c harness.Counter) float64 {
	t.Helper()
	v, err := harness.ScrapeMetric(a.URL("/metrics"), c.Name, c.Match...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
