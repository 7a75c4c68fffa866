//go:build e2e

package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestPeersReplacedByTheAgentsRollingUpdate: the agents' own rolling update
// replaces every peer pod a node's cached peer list names by a pod at a new
// address. The node that was not touched is not at fault: its network check
// reads the list again and passes on the new peers, round after round.
func TestPeersReplacedByTheAgentsRollingUpdate(t *testing.T) {
	watched := cp.NewNode(t, "rollout-watched", harness.NodeOptions{})
	peers := []harness.Node{cp.NewNode(t, "rollout-peer-0", harness.NodeOptions{}), cp.NewNode(t, "rollout-peer-1", harness.NodeOptions{})}
	// The peers' agents run as pods with addresses of their own.
	pods := make([]harness.Node, len(peers))
	running := make([]*agent, len(peers))
	for i, p := range peers {
		pods[i] = podOf(t, p)
		running[i] = startAgent(t, pods[i])
	}
	publishPeers(t, append([]harness.Node{watched}, pods...)...)
	// Every chosen peer (both agents and the DNS pod) must answer: the DNS
	// pod alone cannot carry the node through.
	w := startAgent(t, watched, "--check.network.min-peers=3", "--fleet-budget=100%")
	for _, n := range append(peers, watched) {
		cp.WaitNode(t, n.Name, 20*time.Second, "verified", verified)
	}
	rounds := w.Metric(t, "node_check_duration_seconds_count", `check="network"`)
	failures := w.Metric(t, "node_check_failures_total", `check="network"`)

	// One pod at a time: the new one starts, the EndpointSlice names it
	// instead of the old one, the old one goes.
	for i, p := range peers {
		next := podOf(t, p)
		fresh := startAgent(t, next)
		fresh.WaitReady(t, 20*time.Second)
		pods[i] = next
		publishPeers(t, append([]harness.Node{watched}, pods...)...)
		if err := running[i].Stop(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		running[i] = fresh
	}
	// More rounds than the re-taint threshold since the old pods went.
	after := w.Metric(t, "node_check_duration_seconds_count", `check="network"`)
	harness.Eventually(t, 20*time.Second, "5 network rounds after the rollout", func() (bool, string) {
		got, err := w.TryMetric("node_check_duration_seconds_count", `check="network"`)
		return err == nil && got >= after+5, fmt.Sprintf("%v rounds (err %v)", got-after, err)
	})
	if n := cp.GetNode(t, watched.Name); !verified(n) {
		t.Errorf("untouched node %s after the peers' rollout: taints %v, label %q", watched.Name, n.Spec.Taints, n.Labels["node-ready/verified"])
	}
	if got := w.Metric(t, "node_check_failures_total", `check="network"`); got != failures {
		t.Errorf("network check failed %v times in %v rounds during and after the peers' rollout, want 0", got-failures, w.Metric(t, "node_check_duration_seconds_count", `check="network"`)-rounds)
	}
	if got := w.Metric(t, "node_ready_taint_operations_total", `operation="add"`); got != 0 {
		t.Errorf("%v re-taints of the untouched node", got)
	}
	if !logContains(w.Process, "peer list read again") {
		t.Error("the untouched node's agent never read its peer list again: the rollout did not reach its cached list")
	}
}

// podOf is a new pod of the agent on node: the node's name, a new address.
func podOf(t *testing.T, node harness.Node) harness.Node {
	t.Helper()
	ip, err := cp.NewAddress()
	if err != nil {
		t.Fatal(err)
	}
	return harness.Node{Name: node.Name, IP: ip}
}

// ownResolvConf is a copy of the harness resolver configuration for one
// agent, so a test can break that node's DNS alone.
func ownResolvConf(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte(mustRead(t, cp.ResolvConf)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// breakDNS points the resolver configuration at an address where nothing answers.
func breakDNS(t *testing.T, resolvConf string) {
	t.Helper()
	if err := os.WriteFile(resolvConf, []byte("nameserver 10.213.0.250\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWokenRoundsDoNotShortenTheTolerance: on a node in service, a round the
// node's watch wakes at once (here: a wait-for taint that comes and goes,
// as a CNI or an autoscaler may do) is no periodic round: while its checks
// fail it does not count toward --retaint-threshold, so changes of the node
// cannot re-taint it in seconds. Anchored on the rounds run.
func TestWokenRoundsDoNotShortenTheTolerance(t *testing.T) {
	n := cp.NewNode(t, "woken-rounds", harness.NodeOptions{})
	resolv := ownResolvConf(t)
	a := startAgent(t, n, "--check.dns.resolv-conf="+resolv, "--fleet-budget=100%", "--retaint-threshold=3", "--check-period=2m")
	cp.WaitNode(t, n.Name, 20*time.Second, "verified", verified)
	breakDNS(t, resolv)
	const waitFor = "karpenter.sh/unregistered"
	for i := range 4 {
		rounds := a.Metric(t, "node_check_duration_seconds_count", `check="dns"`)
		cp.KubectlT(t, "", "taint", "node", n.Name, waitFor+"=true:NoExecute")
		cp.KubectlT(t, "", "taint", "node", n.Name, waitFor+":NoExecute-")
		harness.Eventually(t, 20*time.Second, fmt.Sprintf("a round woken by the taint's removal (%d)", i+1), func() (bool, string) {
			got, err := a.TryMetric("node_check_duration_seconds_count", `check="dns"`)
			return err == nil && got > rounds, fmt.Sprintf("%v rounds (err %v)", got-rounds, err)
		})
	}
	if got := a.Metric(t, "node_check_failures_total", `check="dns"`); got < 4 {
		t.Fatalf("%v failed dns rounds, want at least 4: DNS is not broken", got)
	}
	if nd := cp.GetNode(t, n.Name); !verified(nd) {
		t.Errorf("re-tainted by rounds woken by the node's changes, within seconds of a %s period: taints %v, label %q",
			2*time.Minute, nd.Spec.Taints, nd.Labels["node-ready/verified"])
	}
	if got := a.Metric(t, "node_ready_consecutive_failures"); got != 0 {
		t.Errorf("%v failed rounds counted toward the re-taint, want 0: no periodic round ran", got)
	}
}
