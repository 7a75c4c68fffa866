package checks

import (
	"context"
	"net"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

// TestDNSCheckIPv6Resolver: a resolver at an IPv6 address, with and without
// a zone, is asked like any other.
func TestDNSCheckIPv6Resolver(t *testing.T) {
	server := fakeResolverOn(t, "::1", answerFamilies("", "fd00::1"))
	_, port, _ := net.SplitHostPort(server)
	for _, s := range []string{server, net.JoinHostPort("::1%lo", port)} {
		t.Run(s, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := (&DNS{Names: []string{"kubernetes.default.svc.cluster.local"}, Families: IPFamilies{IPv6}, Server: s}).Run(ctx); err != nil {
				t.Fatalf("Run via %s = %v", s, err)
			}
		})
	}
}

// TestDiscoveryIPv6: the discovery check queries a kube-dns endpoint at an
// IPv6 address, from an EndpointSlice of type IPv6.
func TestDiscoveryIPv6(t *testing.T) {
	server := fakeResolverOn(t, "::1", answerFamilies("", "fd00::1"))
	_, p, _ := net.SplitHostPort(server)
	port, _ := strconv.Atoi(p)
	ep := endpoints.Endpoint{Addr: netip.MustParseAddr("::1"), Ready: true, UDPPort: int32(port), NodeName: "dns-node"}
	tests := []struct {
		name     string
		families IPFamilies
		wantErr  string
	}{
		{name: "ipv6", families: IPFamilies{IPv6}},
		{name: "dual-stack", families: IPFamilies{IPv4, IPv6}},
		{name: "ipv4 finds no A record", families: IPFamilies{IPv4}, wantErr: "no A record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Discovery{
				Service: endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}, Endpoints: &endpoints.EndpointCache{Source: staticLister{ep}},
				QueryName: "kubernetes.default.svc.cluster.local", NodeName: "self", Families: tt.families,
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := d.Run(ctx)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Run = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "[::1]:")) {
				t.Fatalf("Run = %v, want an error naming [::1] and %q", err, tt.wantErr)
			}
		})
	}
}

// TestNetworkCheckIPv6: the kubernetes Service and pod-to-pod peers at IPv6
// addresses are dialled with the brackets host:port needs.
func TestNetworkCheckIPv6(t *testing.T) {
	up := listen(t, "::1")
	down := downPeer(t, "::1")
	n := &Network{
		KubernetesService: net.JoinHostPort("::1", strconv.Itoa(int(up.TCPPort))),
		PeerServices:      []endpoints.ServiceRef{{Namespace: "ns", Name: "svc"}}, Endpoints: staticLister{up}, NodeName: "self", Peers: 3, MinPeers: 1,
	}
	if err := n.Run(context.Background()); err != nil {
		t.Fatalf("Run = %v", err)
	}
	n.Endpoints = staticLister{down}
	if err := n.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "tcp [::1]:") {
		t.Errorf("Run with the peer down = %v, want an error naming tcp [::1]:port", err)
	}
}

// TestProbeRunIPv6: http and tcp probe targets at IPv6 literals, with the
// brackets host:port needs, are reached and named in errors as written.
func TestProbeRunIPv6(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(probeServerMux())
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://[::1]:") {
		t.Fatalf("server URL %s is not on [::1]", srv.URL)
	}
	refused := endpointAddr(downPeer(t, "::1"))
	tests := []struct {
		target  string
		wantErr string
	}{
		{target: srv.URL + "/ok"},
		{target: srv.URL + "/down", wantErr: "probe: " + srv.URL + "/down: status 503"},
		{target: "tcp://" + endpointAddr(listen(t, "::1"))},
		{target: "tcp://" + strings.Replace(endpointAddr(listen(t, "::1")), "[::1]", "[::1%25lo]", 1)},
		{target: "tcp://" + refused, wantErr: "probe: tcp " + refused + ": dial: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			target, err := ParseProbeTarget(tt.target)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err = NewProbe([]ProbeTarget{target}).Run(ctx)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Run = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Run = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
