//go:build e2e

package fleet_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestJoinRequestsDoNotGrowWithTheSlices: a node joins beside 300 agents'
// endpoints (3 EndpointSlices of the agents' Service), then another beside
// 3 000 (30 slices); each joining agent (simulated, default flags, the
// chart's RBAC) makes the same reads of the API server by verb and
// resource, as the audit log records them, from its start until it
// removed the startup taint (a watch counted when it started): choosing the
// slices of its peers reads their names, not their endpoints, and one
// slice.
func TestJoinRequestsDoNotGrowWithTheSlices(t *testing.T) {
	sizes := []int{300, 3000}
	joins := make([]map[string]int, len(sizes))
	for i, peers := range sizes {
		others := make([]harness.Node, peers)
		for j := range others {
			ip, err := cp.NewAddress()
			if err != nil {
				t.Fatal(err)
			}
			// Every address of the nodes' range is local in the harness's
			// network namespace, and the fleet's shared listener accepts on
			// all of them: the peers answer the network check's dial.
			others[j] = harness.Node{Name: fmt.Sprintf("peer-%d-%d", i, j), IP: ip}
		}
		if err := cp.PublishAgentPeers(t.Context(), others...); err != nil {
			t.Fatal(err)
		}
		node := cp.NewNode(t, fmt.Sprintf("join-%d", i), harness.NodeOptions{})
		offset, err := fleet.AuditOffset(cp.AuditLogPath())
		if err != nil {
			t.Fatal(err)
		}
		untainted := &fleet.UntaintLog{}
		f := startFleet(t, []harness.Node{node}, fleet.Options{SharedListener: true, Log: untainted})
		var at time.Time
		harness.Eventually(t, 60*time.Second, node.Name+"'s agent logged its untaint", func() (bool, string) {
			at = untainted.At(node.Name)
			return !at.IsZero(), "no untaint logged yet"
		})
		if err := f.Stop(); err != nil {
			t.Fatal(err)
		}
		// Up to the untaint's write, received before the agent logged it.
		reqs, err := fleet.RequestsUntil(cp.AuditLogPath(), offset, at)
		if err != nil {
			t.Fatal(err)
		}
		joins[i] = map[string]int{}
		if reqs[node.Name] == nil {
			t.Fatalf("no request of %s's agent in the audit log", node.Name)
		}
		for k, c := range reqs[node.Name].Requests {
			joins[i][k.String()] += c
		}
	}
	var table strings.Builder
	for _, k := range slices.Sorted(maps.Keys(joins[1])) {
		fmt.Fprintf(&table, "\n  %-40s %d slices: %d  %d slices: %d", k, sizes[0]/100, joins[0][k], sizes[1]/100, joins[1][k])
	}
	t.Logf("the joining agent's requests by kind (audit log):%s", table.String())
	if !maps.Equal(joins[0], joins[1]) {
		t.Errorf("a join beside %d slices made %v, beside %d slices %v", sizes[0]/100, joins[0], sizes[1]/100, joins[1])
	}
	for _, k := range []string{"list endpointslices (rv=0)", "get services (rv=0)"} {
		if joins[1][k] == 0 {
			t.Errorf("no %q in the join: the slices were not chosen from their names and the Service's families", k)
		}
	}
}
