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

// joinCost is what one joining agent asked of the API server until its
// untaint: its requests by kind (audit log), the response bytes its client
// read, and of them those of lists of the agents' Service's slices that
// name no slice (choosing the slices from their names).
type joinCost struct {
	requests    map[string]int
	bytes       int64
	namesListed int64
}

// TestJoinRequestsDoNotGrowWithTheSlices: a node joins beside 300 agents'
// endpoints (3 EndpointSlices of the agents' Service), then another beside
// 3 000 (30 slices); each joining agent (simulated, default flags, the
// chart's RBAC) makes the same reads of the API server by verb and
// resource, as the audit log records them, from its start until it
// removed the startup taint (a watch counted when it started). A node
// created with the webhook's hint (the annotation node-ready/peer-slices as
// admission writes it: fleet.PeerSlicesHint) reads
// no list of the slices' names and the same bytes beside 3 and 30 slices,
// within the hint's own length and the noise of watch events; a node
// without it (created while the webhook was down) lists their names, and
// joins as well.
func TestJoinRequestsDoNotGrowWithTheSlices(t *testing.T) {
	sizes := []int{300, 3000}
	hinted := make([]joinCost, len(sizes))
	unhinted := make([]joinCost, len(sizes))
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
		hinted[i] = joinOnce(t, fmt.Sprintf("join-hinted-%d", i), true)
		unhinted[i] = joinOnce(t, fmt.Sprintf("join-%d", i), false)
	}
	var table strings.Builder
	for _, k := range slices.Sorted(maps.Keys(unhinted[1].requests)) {
		fmt.Fprintf(&table, "\n  %-40s %d slices: %d (hinted %d)  %d slices: %d (hinted %d)", k,
			sizes[0]/100, unhinted[0].requests[k], hinted[0].requests[k], sizes[1]/100, unhinted[1].requests[k], hinted[1].requests[k])
	}
	t.Logf("the joining agent's requests by kind (audit log):%s", table.String())
	for i, n := range sizes {
		t.Logf("beside %d slices: hinted %d bytes read (names listed: %d), without the hint %d (names listed: %d)",
			n/100, hinted[i].bytes, hinted[i].namesListed, unhinted[i].bytes, unhinted[i].namesListed)
	}
	if !maps.Equal(unhinted[0].requests, unhinted[1].requests) {
		t.Errorf("a join beside %d slices made %v, beside %d slices %v", sizes[0]/100, unhinted[0].requests, sizes[1]/100, unhinted[1].requests)
	}
	if !maps.Equal(hinted[0].requests, hinted[1].requests) {
		t.Errorf("a hinted join beside %d slices made %v, beside %d slices %v", sizes[0]/100, hinted[0].requests, sizes[1]/100, hinted[1].requests)
	}
	const lists = "list endpointslices (rv=0)"
	for i := range sizes {
		// The names' list is the one list of slices a join without the hint
		// makes beyond the hinted one's.
		if unhinted[i].requests[lists] != hinted[i].requests[lists]+1 {
			t.Errorf("beside %d slices: %d %q without the hint, %d with it: want the names' list only without", sizes[i]/100, unhinted[i].requests[lists], lists, hinted[i].requests[lists])
		}
		if hinted[i].namesListed != 0 || unhinted[i].namesListed == 0 {
			t.Errorf("beside %d slices: the names' list read %d bytes with the hint, %d without", sizes[i]/100, hinted[i].namesListed, unhinted[i].namesListed)
		}
		if unhinted[i].requests["get services (rv=0)"] == 0 || hinted[i].requests["get services (rv=0)"] == 0 {
			t.Errorf("beside %d slices: no read of the Service's families", sizes[i]/100)
		}
	}
	// The hint's names (3 beside 3 slices, api.PeerSlicesHintLen beside
	// 30) in each copy of the node read, and a watch event that may come
	// between the untaint's patch and its log line (bytes are taken there,
	// Traffic.BytesAtUntaint): far below the names of 27 more slices listed
	// (about 12 KiB).
	const noise = 4 << 10
	if d := hinted[1].bytes - hinted[0].bytes; d > noise || d < -noise {
		t.Errorf("a hinted join read %d bytes beside %d slices, %d beside %d: want within %d", hinted[0].bytes, sizes[0]/100, hinted[1].bytes, sizes[1]/100, noise)
	}
}

// joinOnce creates a node, with the webhook's hint of the agents' slices
// when hint is set, and runs its agent until it logged its untaint.
func joinOnce(t *testing.T, name string, hint bool) joinCost {
	t.Helper()
	opts := harness.NodeOptions{}
	if hint {
		hint, err := fleet.PeerSlicesHint(t.Context(), cp.Client, name)
		if err != nil {
			t.Fatal(err)
		}
		opts.Annotations = hint
	}
	node := cp.NewNode(t, name, opts)
	offset, err := fleet.AuditOffset(cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	untainted := &fleet.UntaintLog{}
	f := startFleet(t, []harness.Node{node}, fleet.Options{SharedListener: true, CountTraffic: true, Log: untainted})
	var at time.Time
	harness.Eventually(t, 60*time.Second, node.Name+"'s agent logged its untaint", func() (bool, string) {
		at = untainted.At(node.Name)
		return !at.IsZero(), "no untaint logged yet"
	})
	traffic := f.Agents()[0].Traffic
	// The bytes as the untaint was logged, not when this poll saw it: the
	// watch events in between (a Node's copy each) are not the join's.
	joinBytes, ok := traffic.BytesAtUntaint()
	if !ok {
		t.Fatalf("%s's untaint was logged, but its traffic did not note it", node.Name)
	}
	cost := joinCost{requests: map[string]int{}, bytes: joinBytes,
		namesListed: traffic.BytesOf("GET /apis/discovery.k8s.io/v1/namespaces/" + harness.AgentNamespace + "/endpointslices")}
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	// Up to the untaint's write, received before the agent logged it.
	reqs, err := fleet.RequestsUntil(cp.AuditLogPath(), offset, at)
	if err != nil {
		t.Fatal(err)
	}
	if reqs[node.Name] == nil {
		t.Fatalf("no request of %s's agent in the audit log", node.Name)
	}
	for k, c := range reqs[node.Name].Requests {
		cost.requests[k.String()] += c
	}
	return cost
}
