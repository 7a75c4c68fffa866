package checks

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

type staticLister []endpoints.Endpoint

func (s staticLister) Endpoints(context.Context, endpoints.ServiceRef) ([]endpoints.Endpoint, error) {
	return s, nil
}
func (s staticLister) Refresh(context.Context, endpoints.ServiceRef) ([]endpoints.Endpoint, error) {
	return s, nil
}

// listen opens a TCP listener on a loopback address and returns its endpoint.
func listen(t *testing.T, ip string) endpoints.Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
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
	return endpoints.Endpoint{Addr: netip.MustParseAddr(ip), Ready: true, TCPPort: int32(l.Addr().(*net.TCPAddr).Port), NodeName: "node-" + ip}
}

// downPeer returns a ready endpoint where nothing listens.
func downPeer(t *testing.T, ip string) endpoints.Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return endpoints.Endpoint{Addr: netip.MustParseAddr(ip), Ready: true, TCPPort: int32(port), NodeName: "node-" + ip}
}

func TestNetworkCheck(t *testing.T) {
	up1, up2 := listen(t, "127.0.0.21"), listen(t, "127.0.0.22")
	tests := []struct {
		name     string
		peers    []endpoints.Endpoint
		minPeers int
		wantErr  string
	}{
		{name: "all answer", peers: []endpoints.Endpoint{up1, up2}, minPeers: 1},
		{name: "no peers passes", peers: nil, minPeers: 1},
		{name: "one of two down is enough", peers: []endpoints.Endpoint{up1, downPeer(t, "127.0.0.23")}, minPeers: 1},
		{name: "min peers two with one down fails", peers: []endpoints.Endpoint{up1, downPeer(t, "127.0.0.24")}, minPeers: 2, wantErr: "1 of 2 peers answered, need 2"},
		{name: "all down fails", peers: []endpoints.Endpoint{downPeer(t, "127.0.0.25"), downPeer(t, "127.0.0.26")}, minPeers: 1, wantErr: "0 of 2 peers answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &Network{
				PeerServices: []endpoints.ServiceRef{{Namespace: "ns", Name: "svc"}}, Endpoints: staticLister(tt.peers),
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

// changingSource is an endpoints.EndpointLister whose answer the test changes, as the
// endpointslice controller changes a Service's slices during a rollout.
type changingSource struct {
	mu    sync.Mutex
	eps   []endpoints.Endpoint
	reads int
}

func (s *changingSource) Endpoints(context.Context, endpoints.ServiceRef) ([]endpoints.Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.eps, nil
}

func (s *changingSource) set(eps ...endpoints.Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eps = eps
}

// TestNetworkCheckRefreshesPeersThatWentAway: the agents' own rolling update
// replaces the pods the cached peer list names. Peers that went away are not
// the node's fault: on a failure the check reads the list again once and
// passes on the peers that replaced them; it still fails when the peers
// named by a fresh list do not answer either.
func TestNetworkCheckRefreshesPeersThatWentAway(t *testing.T) {
	oldA, oldB := listenCloser(t, "127.0.0.31"), listenCloser(t, "127.0.0.32")
	src := &changingSource{}
	src.set(oldA.ep, oldB.ep)
	cache := &endpoints.EndpointCache{Source: src, MaxAge: time.Hour}
	n := &Network{
		PeerServices: []endpoints.ServiceRef{{Namespace: "ns", Name: "svc"}}, Endpoints: cache,
		NodeName: "self", Peers: 3, MinPeers: 2,
	}
	run := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return n.Run(ctx)
	}
	if err := run(); err != nil {
		t.Fatalf("before the rollout: %v", err)
	}
	// The rollout: new pods answer at new addresses, the old ones are gone,
	// and the cache (an hour old at most) still names the old ones.
	newA, newB := listen(t, "127.0.0.33"), listen(t, "127.0.0.34")
	src.set(newA, newB)
	oldA.close()
	oldB.close()
	if err := run(); err != nil {
		t.Fatalf("after the peers were replaced: %v (the stale peer list was not refreshed)", err)
	}
	if got, _ := cache.Endpoints(context.Background(), endpoints.ServiceRef{Namespace: "ns", Name: "svc"}); len(got) != 2 || got[0].Addr != newA.Addr && got[1].Addr != newA.Addr {
		t.Errorf("cache after the refresh = %v, want the new peers", got)
	}
	// Peers that are listed and do not answer are the node's problem.
	reads := src.reads
	src.set(downPeer(t, "127.0.0.35"), downPeer(t, "127.0.0.36"))
	cache.MaxAge = 0
	err := run()
	if err == nil || !strings.Contains(err.Error(), "0 of 2 peers answered") {
		t.Errorf("with the listed peers down: %v, want 0 of 2 peers answered", err)
	}
	if src.reads-reads != 2 {
		t.Errorf("%d reads of the peer list in a failed round, want 2 (the round's own and one refresh)", src.reads-reads)
	}
}

// closable is a listening peer the test can take away.
type closable struct {
	ep    endpoints.Endpoint
	close func()
}

// listenCloser is listen with a way to stop listening.
func listenCloser(t *testing.T, ip string) closable {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { l.Close() }) }
	t.Cleanup(stop)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return closable{ep: endpoints.Endpoint{Addr: netip.MustParseAddr(ip), Ready: true, TCPPort: int32(l.Addr().(*net.TCPAddr).Port), NodeName: "node-" + ip}, close: stop}
}
