//go:build e2e

package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestDNSBackendElsewhereIsNoNodesFault (issue 35, R13): the cluster DNS
// Service has two CoreDNS endpoints, and one sits on a node whose upstream
// is cut, so every query for a name it forwards dies there; kube-proxy
// (here the harness balancer at the Service's ClusterIP) sends each query
// to either. One node's own DNS is broken (its resolv.conf names a dead
// address). With room for one re-taint (--fleet-budget=1), the broken node
// is re-tainted and takes it; the healthy nodes' dns check never fails
// (their failures through the Service are asked of each endpoint directly,
// and one answers), so none is re-tainted or suppressed, and each tells of
// the degraded endpoint (a DNSBackendDegraded Event, the
// node_check_degraded_backends gauge). Before, the healthy nodes' dns
// check failed whenever their query went to the broken endpoint. Anchored
// on the healthy agents' rounds.
func TestDNSBackendElsewhereIsNoNodesFault(t *testing.T) {
	var healthy []harness.Node
	for i := range 3 {
		healthy = append(healthy, cp.NewNode(t, fmt.Sprintf("dns-backends-%d", i), harness.NodeOptions{}))
	}
	broken := cp.NewNode(t, "dns-backends-broken", harness.NodeOptions{})
	publishPeers(t, append(slices.Clone(healthy), broken)...)
	d := cp.StartDegradedDNS(t, "kube-dns-degraded", broken.Name)

	args := []string{
		"--check.discovery.service=" + d.Service(), "--fleet-budget=1", "--retaint-threshold=3",
		// Short rounds, but room for a busy machine: the node's resolver
		// has half of it (2 s) before the endpoints are asked directly; with
		// 2s in all, one round of a healthy node failed at load 23 when the
		// query that went to the broken endpoint came back only after the
		// whole timeout.
		"--check-timeout=4s",
	}
	var agents []*agent
	for _, n := range healthy {
		agents = append(agents, startAgent(t, n, append(slices.Clone(args), "--check.dns.resolv-conf="+d.ResolvConf)...))
	}
	brokenResolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(brokenResolv, []byte(mustRead(t, d.ResolvConf)), 0o644); err != nil {
		t.Fatal(err)
	}
	brokenAgent := startAgent(t, broken, append(slices.Clone(args), "--check.dns.resolv-conf="+brokenResolv)...)
	for _, n := range append(slices.Clone(healthy), broken) {
		cp.WaitNode(t, n.Name, 30*time.Second, "verified", verified)
	}

	breakDNS(t, brokenResolv)
	cp.WaitNode(t, broken.Name, 60*time.Second, "re-tainted", func(n *corev1.Node) bool { return hasTaint(n, unhealthyTaint) })
	cp.WaitEvent(t, 10*time.Second, "Node", broken.Name, api.EventNodeRetainted, "")
	if got := brokenAgent.Metric(t, "node_check_failures_total", `check="dns"`); got < 3 {
		t.Errorf("broken node: %v failed dns rounds, want at least 3", got)
	}

	// Many rounds of the healthy nodes after the broken one took the
	// budget, each about as likely to send its external name to the broken
	// endpoint as not.
	harness.WaitCounters(t, daemons(agents), iterations, 12, "healthy agents' rounds with the broken node re-tainted", func() (bool, string) {
		for _, n := range healthy {
			if node := cp.GetNode(t, n.Name); !verified(node) {
				return false, fmt.Sprintf("healthy node %s is not verified: taints %v, labels %v", n.Name, node.Spec.Taints, node.Labels)
			}
		}
		return true, ""
	})
	for i, a := range agents {
		name := healthy[i].Name
		if got := a.Metric(t, "node_check_failures_total", `check="dns"`); got != 0 {
			t.Errorf("healthy node %s: %v failed dns rounds in %v, want 0: the broken endpoint elsewhere was counted against it",
				name, got, a.Metric(t, "node_check_duration_seconds_count", `check="dns"`))
		}
		if got := a.Metric(t, "node_ready_taint_operations_total", `operation="add"`); got != 0 {
			t.Errorf("healthy node %s: %v re-taints", name, got)
		}
		for _, reason := range []string{api.EventRetaintSuppressed, api.EventNodeRetainted} {
			if notes := cp.EventNotes(t, "Node", name, reason); len(notes) > 0 {
				t.Errorf("healthy node %s: %s %q", name, reason, notes)
			}
		}
		cp.WaitEvent(t, 30*time.Second, "Node", name, api.EventDNSBackendDegraded, d.Broken+":53")
		if got := a.Metric(t, "node_check_degraded_backends", `check="dns"`); got != 1 {
			t.Errorf("healthy node %s: node_check_degraded_backends{check=\"dns\"} = %v, want 1", name, got)
		}
		for _, note := range cp.EventNotes(t, "Node", name, api.EventDNSBackendDegraded) {
			if strings.Contains(note, d.Healthy+":53") {
				t.Errorf("healthy node %s: the healthy endpoint told as degraded: %q", name, note)
			}
		}
	}
}
