//go:build e2e

package agent_test

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestAgentFollowsOneSliceOfItsPeers: among 250 peers in three
// EndpointSlices, an agent watches one slice of its own Service, by name,
// and dials only peers that slice holds; when that slice is deleted it
// follows another, and dials that one's peers. kube-dns is still watched
// whole.
func TestAgentFollowsOneSliceOfItsPeers(t *testing.T) {
	peers, dialed := listeningPeers(t, 250)
	node := cp.NewNode(t, "peerslice", harness.NodeOptions{})
	kit.PublishPeers(t, append(peers, node)...)
	offset, err := fleet.AuditOffset(cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	// A short peer-refresh: the deleted slice is replaced within seconds.
	a := startAgent(t, node, "--check.network.peer-refresh=2s")
	cp.WaitNode(t, node.Name, 30*time.Second, "verified", verified)

	first := waitFollowed(t, node.Name, offset, nil)
	firstAddrs := sliceAddrs(t, first)
	harness.Eventually(t, 20*time.Second, "peers of "+first+" dialed", func() (bool, string) {
		got := dialed.since(time.Time{})
		for _, addr := range got {
			if !firstAddrs[addr] {
				t.Fatalf("dialed %s, not in the followed slice %s", addr, first)
			}
		}
		return len(got) > 0, fmt.Sprintf("%d dialed", len(got))
	})

	deleted := time.Now()
	if err := cp.Client.DiscoveryV1().EndpointSlices(harness.AgentNamespace).Delete(t.Context(), first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitFollowed(t, node.Name, offset, []string{first})
	secondAddrs := sliceAddrs(t, second)
	harness.Eventually(t, 20*time.Second, "peers of "+second+" dialed", func() (bool, string) {
		got := dialed.since(deleted)
		return slices.ContainsFunc(got, func(addr string) bool { return secondAddrs[addr] }), fmt.Sprintf("dialed since the deletion: %v", got)
	})
	harness.WaitCounters(t, daemons([]*agent{a}), iterations, 2, "two rounds on the new slice", nil)
	cp.WaitNode(t, node.Name, 5*time.Second, "still verified", verified)
}

// waitFollowed waits until the agent on node has watched, since offset in
// the audit log, exactly one slice of the agents' Service besides those in
// before, each by name and never the Service whole, and returns it.
func waitFollowed(t *testing.T, node string, offset int64, before []string) string {
	t.Helper()
	var names []string
	harness.Eventually(t, 30*time.Second, "one more peer slice watched by name", func() (bool, string) {
		watches, _, err := fleet.Watches(cp.AuditLogPath(), offset)
		if err != nil {
			t.Fatal(err)
		}
		names = nil
		dns := false
		for _, uri := range watches[node] {
			if !strings.Contains(uri, "/endpointslices?") {
				continue
			}
			dns = dns || strings.Contains(uri, discoveryv1.LabelServiceName+"=kube-dns")
			if !strings.Contains(uri, discoveryv1.LabelServiceName+"="+harness.AgentPeerService) {
				continue
			}
			_, name, ok := strings.Cut(uri, "fieldSelector=metadata.name=")
			if !ok {
				t.Fatalf("the agents' Service watched whole: %s", uri)
			}
			name, _, _ = strings.Cut(name, "&")
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		if !dns {
			return false, "kube-dns not watched yet"
		}
		return len(names) == len(before)+1 && !slices.Contains(before, names[len(names)-1]), fmt.Sprintf("peer slices watched: %v", names)
	})
	return names[len(names)-1]
}

// sliceAddrs are the addresses the agents' slice name holds.
func sliceAddrs(t *testing.T, name string) map[string]bool {
	t.Helper()
	s, err := cp.Client.DiscoveryV1().EndpointSlices(harness.AgentNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			out[a] = true
		}
	}
	return out
}

// dialLog records which peer addresses were dialed, and when.
type dialLog struct {
	mu sync.Mutex
	at map[string]time.Time
}

// since lists the addresses last dialed after t.
func (d *dialLog) since(t time.Time) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for addr, at := range d.at {
		if at.After(t) {
			out = append(out, addr)
		}
	}
	slices.Sort(out)
	return out
}

// listeningPeers are count peers, without Node objects or agents: each a
// node address that accepts connections on the agents' metrics port, as a
// peer agent would, and records them.
func listeningPeers(t *testing.T, count int) ([]harness.Node, *dialLog) {
	t.Helper()
	log := &dialLog{at: map[string]time.Time{}}
	var peers []harness.Node
	for i := range count {
		ip, err := cp.NewAddress()
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(harness.MetricsPort)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				log.mu.Lock()
				log.at[ip] = time.Now()
				log.mu.Unlock()
				_ = c.Close()
			}
		}()
		peers = append(peers, harness.Node{Name: fmt.Sprintf("peer-%d", i), IP: ip})
	}
	return peers, log
}
