package checks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Network proves the node can reach the cluster network: a TCP connection to
// the kubernetes Service, and pod-to-pod TCP connections to a few endpoints on
// other nodes (kube-dns pods and peer agents).
type Network struct {
	// KubernetesService is the in-cluster API address (host:port); empty skips that part.
	KubernetesService string
	// PeerServices are the Services whose endpoints are peer candidates.
	PeerServices []ServiceRef
	// Endpoints lists peer candidates (normally an EndpointCache).
	Endpoints EndpointLister
	// NodeName and PodIP identify this node's own endpoints, which are skipped.
	NodeName string
	PodIP    netip.Addr
	// Peers is how many peers to try each round.
	Peers int
	// MinPeers is how many of the chosen peers must answer (capped at the number chosen).
	MinPeers int
	// Log receives the note that there are no peers to try.
	Log *slog.Logger

	noPeers atomic.Bool
}

// Name implements Check.
func (*Network) Name() string { return "network" }

// Run implements Check.
func (n *Network) Run(ctx context.Context) error {
	if n.KubernetesService != "" {
		if err := dialTCP(ctx, n.KubernetesService); err != nil {
			return fmt.Errorf("network: kubernetes service: %w", err)
		}
	}
	if n.Peers <= 0 {
		return nil
	}
	var candidates []Endpoint
	var listErrs []error
	for _, svc := range n.PeerServices {
		eps, err := n.Endpoints.Endpoints(ctx, svc)
		if err != nil {
			listErrs = append(listErrs, err)
			continue
		}
		candidates = append(candidates, eps...)
	}
	peers := SelectPeers(n.NodeName, n.PodIP, candidates, n.Peers)
	if len(peers) == 0 {
		if len(listErrs) > 0 {
			return fmt.Errorf("network: no peers known: %w", errors.Join(listErrs...))
		}
		// The first node of a cluster has nobody to talk to; that is not a broken network.
		if !n.noPeers.Swap(true) && n.Log != nil {
			n.Log.Info("no ready peer endpoints on other nodes; pod-to-pod check passes without peers", "check", "network")
		}
		return nil
	}
	n.noPeers.Store(false)

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []string
	)
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := net.JoinHostPort(p.Addr.String(), strconv.Itoa(int(p.TCPPort)))
			if err := dialTCP(ctx, addr); err != nil {
				mu.Lock()
				failed = append(failed, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	need := min(max(n.MinPeers, 1), len(peers))
	if ok := len(peers) - len(failed); ok < need {
		return fmt.Errorf("network: pod-to-pod: %d of %d peers answered, need %d: %s", ok, len(peers), need, strings.Join(failed, "; "))
	}
	return nil
}

func dialTCP(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("tcp %s: %w", addr, err)
	}
	return conn.Close()
}

// NetworkConfig configures the network check.
type NetworkConfig struct {
	// KubernetesService is the in-cluster API address (host:port); empty skips that part.
	KubernetesService string
	// PeerService is the agent's headless Service (in the agent's namespace) whose endpoints are peers.
	PeerService string
	// Peers is how many pod-to-pod peers are tried each round.
	Peers int
	// MinPeers is how many of the chosen peers must answer.
	MinPeers int
	// PeerRefresh bounds how long the peer list is cached.
	PeerRefresh time.Duration
}

// NewNetworkConfig returns the network check's defaults; the kubernetes
// Service address comes from the environment a pod gets.
func NewNetworkConfig() *NetworkConfig {
	k8sSvc := ""
	if h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"); h != "" && p != "" {
		k8sSvc = net.JoinHostPort(h, p)
	}
	return &NetworkConfig{KubernetesService: k8sSvc, PeerService: "kube-node-ready", Peers: 3, MinPeers: 1, PeerRefresh: 5 * time.Minute}
}

// AddFlags implements Config.
func (c *NetworkConfig) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.KubernetesService, "check.network.kubernetes-service", c.KubernetesService, "in-cluster API host:port the network check connects to (default $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT); empty skips it")
	fs.StringVar(&c.PeerService, "check.network.peer-service", c.PeerService, "the agent's headless Service (in --pod-namespace) whose endpoints are peers; empty uses only cluster DNS pods")
	fs.IntVar(&c.Peers, "check.network.peers", c.Peers, "pod-to-pod peers on other nodes tried each round; 0 disables pod-to-pod")
	fs.IntVar(&c.MinPeers, "check.network.min-peers", c.MinPeers, "chosen peers that must answer (capped at the number chosen)")
	fs.DurationVar(&c.PeerRefresh, "check.network.peer-refresh", c.PeerRefresh, "longest time the peer list is cached")
}

// Validate implements Config.
func (c *NetworkConfig) Validate(bool) []error {
	var errs []error
	if c.KubernetesService != "" {
		if _, _, err := net.SplitHostPort(c.KubernetesService); err != nil {
			errs = append(errs, fmt.Errorf("--check.network.kubernetes-service: want host:port: %v", err))
		}
	}
	if c.Peers < 0 {
		errs = append(errs, fmt.Errorf("--check.network.peers: must not be negative, got %d", c.Peers))
	}
	if c.MinPeers < 1 {
		errs = append(errs, fmt.Errorf("--check.network.min-peers: must be at least 1, got %d", c.MinPeers))
	}
	if c.PeerRefresh <= 0 {
		errs = append(errs, fmt.Errorf("--check.network.peer-refresh: must be positive, got %s", c.PeerRefresh))
	}
	return errs
}

// Build implements Config.
func (c *NetworkConfig) Build(d Deps) Check {
	services := []ServiceRef{d.DNSService}
	if c.PeerService != "" {
		services = append(services, ServiceRef{Namespace: d.PodNamespace, Name: c.PeerService})
	}
	// The cache is shared with discovery, which refreshes it every round;
	// how long peers may be cached is this check's setting.
	d.Endpoints.MaxAge = c.PeerRefresh
	return &Network{
		KubernetesService: c.KubernetesService, PeerServices: services, Endpoints: d.Endpoints,
		NodeName: d.NodeName, PodIP: d.PodIP, Peers: c.Peers, MinPeers: c.MinPeers, Log: d.Log,
	}
}
