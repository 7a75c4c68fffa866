package checks

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

type staticLister []Endpoint

func (s staticLister) Endpoints(context.Context, ServiceRef) ([]Endpoint, error) { return s, nil }

// listen opens a TCP listener on a loopback address and returns its endpoint.
func listen(t *testing.T, ip string) Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return Endpoint{Addr: netip.MustParseAddr(ip), Ready: true, TCPPort: int32(l.Addr().(*net.TCPAddr).Port), NodeName: "node-" + ip}
}

// downPeer returns a ready endpoint where nothing listens.
func downPeer(t *testing.T, ip string) Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return Endpoint{Addr: netip.MustParseAddr(ip), Ready: true, TCPPort: int32(port), NodeName: "node-" + ip}
}

func TestNetworkCheck(t *testing.T) {
	up1, up2 := listen(t, "127.0.0.21"), listen(t, "127.0.0.22")
	tests := []struct {
		name     string
		peers    []Endpoint
		minPeers int
		wantErr  string
	}{
		{name: "all answer", peers: []Endpoint{up1, up2}, minPeers: 1},
		{name: "no peers passes", peers: nil, minPeers: 1},
		{name: "one of two down is enough", peers: []Endpoint{up1, downPeer(t, "127.0.0.23")}, minPeers: 1},
		{name: "min peers two with one down fails", peers: []Endpoint{up1, downPeer(t, "127.0.0.24")}, minPeers: 2, wantErr: "1 of 2 peers answered, need 2"},
		{name: "all down fails", peers: []Endpoint{downPeer(t, "127.0.0.25"), downPeer(t, "127.0.0.26")}, minPeers: 1, wantErr: "0 of 2 peers answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &Network{
				PeerServices: []ServiceRef{{"ns", "svc"}}, Endpoints: staticLister(tt.peers),
				NodeName: "self", Peers: 3, MinPeers: tt.minPeers,
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := n.Run(ctx)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Run = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Run = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestNetworkCheckKubernetesService(t *testing.T) {
	down := downPeer(t, "127.0.0.27")
	n := &Network{KubernetesService: net.JoinHostPort("127.0.0.27", strconv.Itoa(int(down.TCPPort)))}
	err := n.Run(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "network: kubernetes service: tcp 127.0.0.27") {
		t.Errorf("Run = %v, want a network: kubernetes service error", err)
	}
}
