package endpoints

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func ep(addr, node string, ready bool) Endpoint {
	return Endpoint{Addr: netip.MustParseAddr(addr), NodeName: node, Ready: ready, TCPPort: 8080, UDPPort: 53}
}

func TestEndpointsFromSlices(t *testing.T) {
	slices := []discoveryv1.EndpointSlice{
		{
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{
				{Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
				{Port: ptr.To[int32](9153)}, // protocol unset means TCP
			},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("a")},
				{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
				{Addresses: []string{"bogus"}},
			},
		},
		{AddressType: discoveryv1.AddressTypeFQDN, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"example.com"}}}},
	}
	got := EndpointsFromSlices(slices)
	if len(got) != 3 {
		t.Fatalf("got %d endpoints, want 3 (FQDN slice skipped): %+v", len(got), got)
	}
	if got[0].Addr != netip.MustParseAddr("10.0.0.1") || got[0].NodeName != "a" || !got[0].Ready || got[0].TCPPort != 9153 || got[0].UDPPort != 53 {
		t.Errorf("first endpoint = %+v", got[0])
	}
	if got[1].Ready {
		t.Error("ready=false endpoint reported ready")
	}
	if got[2].Addr.IsValid() {
		t.Error("unparsable address reported valid")
	}
}

func TestSelectPeers(t *testing.T) {
	cands := []Endpoint{
		ep("10.0.1.1", "self", true),              // on this node
		ep("10.0.1.2", "b", false),                // not ready
		{NodeName: "c", Ready: true, TCPPort: 80}, // no address
		ep("10.0.1.4", "d", true),
		ep("10.0.1.4", "d", true), // duplicate
		ep("10.0.1.5", "e", true),
		ep("10.0.1.6", "f", true),
		ep("10.0.1.7", "", true),
		{Addr: netip.MustParseAddr("10.0.1.8"), Ready: true}, // no TCP port
		ep("10.0.1.9", "g", true),                            // own pod IP
	}
	got := SelectPeers("self", netip.MustParseAddr("10.0.1.9"), cands, 3)
	if len(got) != 3 {
		t.Fatalf("got %d peers, want 3: %+v", len(got), got)
	}
	allowed := map[string]bool{"10.0.1.4": true, "10.0.1.5": true, "10.0.1.6": true, "10.0.1.7": true}
	seen := map[netip.Addr]bool{}
	for _, p := range got {
		if !allowed[p.Addr.String()] || seen[p.Addr] {
			t.Errorf("peer %s should not be chosen (or chosen twice)", p.Addr)
		}
		seen[p.Addr] = true
	}
	// Stable: the same node picks the same peers whatever the input order.
	rev := make([]Endpoint, len(cands))
	for i := range cands {
		rev[len(cands)-1-i] = cands[i]
	}
	again := SelectPeers("self", netip.MustParseAddr("10.0.1.9"), rev, 3)
	for i := range got {
		if got[i].Addr != again[i].Addr {
			t.Fatalf("selection depends on input order: %v vs %v", got, again)
		}
	}
}

func TestSelectPeersSpreadsLoad(t *testing.T) {
	var cands []Endpoint
	for i := range 20 {
		cands = append(cands, ep(fmt.Sprintf("10.0.2.%d", i+1), fmt.Sprintf("peer-%d", i), true))
	}
	hits := map[netip.Addr]int{}
	for i := range 1000 {
		for _, p := range SelectPeers(fmt.Sprintf("node-%d", i), netip.Addr{}, cands, 3) {
			hits[p.Addr]++
		}
	}
	// 3000 picks over 20 peers: 150 each on average. Rendezvous hashing keeps
	// every peer well within a factor of two of that.
	for addr, n := range hits {
		if n < 75 || n > 300 {
			t.Errorf("peer %s picked %d times of 3000; load is not spread", addr, n)
		}
	}
	if len(hits) != 20 {
		t.Errorf("only %d of 20 peers ever picked", len(hits))
	}
}

type countingLister struct {
	calls int
	eps   []Endpoint
	err   error
}

func (c *countingLister) Endpoints(context.Context, ServiceRef) ([]Endpoint, error) {
	c.calls++
	return c.eps, c.err
}

func TestEndpointCache(t *testing.T) {
	now := time.Unix(1000, 0)
	src := &countingLister{eps: []Endpoint{ep("10.0.0.1", "a", true)}}
	c := &EndpointCache{Source: src, MaxAge: 5 * time.Minute, Now: func() time.Time { return now }}
	svc := ServiceRef{"kube-system", "kube-dns"}
	for range 3 {
		if _, err := c.Endpoints(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
	}
	if src.calls != 1 {
		t.Errorf("%d reads within MaxAge, want 1", src.calls)
	}
	now = now.Add(6 * time.Minute)
	src.err = errors.New("api down")
	got, err := c.Endpoints(context.Background(), svc)
	if err != nil || len(got) != 1 || src.calls != 2 {
		t.Errorf("stale entry with failing refresh: got %v, %v after %d reads; want the old list", got, err, src.calls)
	}
	if _, err := c.Endpoints(context.Background(), ServiceRef{"x", "y"}); err == nil {
		t.Error("missing entry with failing source returned no error")
	}
}

func TestParseServiceRef(t *testing.T) {
	if got, err := ParseServiceRef("kube-system/kube-dns"); err != nil || got != (ServiceRef{"kube-system", "kube-dns"}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "kube-dns", "/x", "x/"} {
		if _, err := ParseServiceRef(bad); err == nil {
			t.Errorf("ParseServiceRef(%q) accepted", bad)
		}
	}
}

// TestEndpointsFromDualStackSlices: a dual-stack Service has one slice per
// family; the endpoints of both are read, each with its slice's ports.
func TestEndpointsFromDualStackSlices(t *testing.T) {
	ports := []discoveryv1.EndpointPort{{Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)}}
	got := EndpointsFromSlices([]discoveryv1.EndpointSlice{
		{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("a")}}},
		{AddressType: discoveryv1.AddressTypeIPv6, Ports: ports, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}, NodeName: ptr.To("a")}}},
	})
	if len(got) != 2 || got[0].Addr != netip.MustParseAddr("10.0.0.1") || got[1].Addr != netip.MustParseAddr("fd00::1") || got[1].UDPPort != 53 {
		t.Fatalf("endpoints = %+v, want 10.0.0.1 and fd00::1, both with UDP port 53", got)
	}
}
