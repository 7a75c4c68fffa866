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

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Network proves the node can reach the cluster network: a TCP connection to
// the kubernetes Service, and pod-to-pod TCP connections to a few endpoints on
// other nodes (kube-dns pods and peer agents).
type Network struct {
	// KubernetesService is the in-cluster API address (host:port); empty skips that part.
	KubernetesService string
	// PeerServices are the Services whose endpoints are peer candidates.
	PeerServices []endpoints.ServiceRef
	// Endpoints lists peer candidates (normally an endpoints.EndpointCache).
	Endpoints PeerLister
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

// PeerLister lists peer candidates, possibly from a cache, and reads them
// anew on demand; endpoints.EndpointCache implements it.
type PeerLister interface {
	endpoints.EndpointLister
	// Refresh reads svc's endpoints from the source, past any cache.
	Refresh(ctx context.Context, svc endpoints.ServiceRef) ([]endpoints.Endpoint, error)
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
	return n.podToPod(ctx)
}

// podToPod dials the chosen peers. When too few answer it reads the peer
// list again, once, and dials the peers the fresh list names: the list is
// cached for minutes, and during the agents' own rolling update (or any
// rollout of the DNS pods) the peers it names are replaced by pods at new
// addresses. A peer that went away is not this node's fault; peers a
// current list names that do not answer are.
func (n *Network) podToPod(ctx context.Context) error {
	peers, err := n.choose(ctx, n.Endpoints.Endpoints)
	if err != nil || len(peers) == 0 {
		return err
	}
	// A stale address may drop packets rather than refuse: keep half of
	// the time for the peers of a fresh list.
	first := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		first, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	answered := map[netip.Addr]bool{}
	failed := n.dial(first, peers, answered)
	if n.enough(peers, answered) {
		return nil
	}
	fresh, err := n.choose(ctx, n.Endpoints.Refresh)
	if err != nil {
		// The list cannot be read again: judge on the peers we have.
		return n.failure(peers, answered, failed)
	}
	if len(fresh) == 0 {
		return nil
	}
	if n.Log != nil {
		n.Log.Debug("too few peers answered; peer list read again", "check", "network", "failed", strings.Join(failed, "; "))
	}
	failed = n.dial(ctx, fresh, answered)
	if n.enough(fresh, answered) {
		return nil
	}
	return n.failure(fresh, answered, failed)
}

// choose lists the candidates of every peer Service with list and picks
// this round's peers. No peers at all is nil: the first node of a cluster
// has nobody to talk to, and that is not a broken network.
func (n *Network) choose(ctx context.Context, list func(context.Context, endpoints.ServiceRef) ([]endpoints.Endpoint, error)) ([]endpoints.Endpoint, error) {
	var candidates []endpoints.Endpoint
	var listErrs []error
	for _, svc := range n.PeerServices {
		eps, err := list(ctx, svc)
		if err != nil {
			listErrs = append(listErrs, err)
			continue
		}
		candidates = append(candidates, eps...)
	}
	peers := endpoints.SelectPeers(n.NodeName, n.PodIP, candidates, n.Peers)
	if len(peers) == 0 {
		if len(listErrs) > 0 {
			return nil, fmt.Errorf("network: no peers known: %w", errors.Join(listErrs...))
		}
		if !n.noPeers.Swap(true) && n.Log != nil {
			n.Log.Info("no ready peer endpoints on other nodes; pod-to-pod check passes without peers", "check", "network")
		}
		return nil, nil
	}
	n.noPeers.Store(false)
	return peers, nil
}

// dial connects to every peer not yet in answered, concurrently, marks
// those that answer, and returns the errors of those that did not.
func (n *Network) dial(ctx context.Context, peers []endpoints.Endpoint, answered map[netip.Addr]bool) []string {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []string
	)
	// Pick the peers before the first goroutine writes to answered.
	var todo []endpoints.Endpoint
	for _, p := range peers {
		if !answered[p.Addr] {
			todo = append(todo, p)
		}
	}
	for _, p := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := net.JoinHostPort(p.Addr.String(), strconv.Itoa(int(p.TCPPort)))
			err := dialTCP(ctx, addr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err.Error())
				return
			}
			answered[p.Addr] = true
		}()
	}
	wg.Wait()
	return failed
}

// need is how many of peers must answer.
func (n *Network) need(peers []endpoints.Endpoint) int {
	return min(max(n.MinPeers, 1), len(peers))
}

// enough reports whether enough of peers answered.
func (n *Network) enough(peers []endpoints.Endpoint, answered map[netip.Addr]bool) bool {
	return countAnswered(peers, answered) >= n.need(peers)
}

func (n *Network) failure(peers []endpoints.Endpoint, answered map[netip.Addr]bool, failed []string) error {
	return fmt.Errorf("network: pod-to-pod: %d of %d peers answered, need %d: %s",
		countAnswered(peers, answered), len(peers), n.need(peers), strings.Join(failed, "; "))
}

func countAnswered(peers []endpoints.Endpoint, answered map[netip.Addr]bool) int {
	ok := 0
	for _, p := range peers {
		if answered[p.Addr] {
			ok++
		}
	}
	return ok
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
	// PeerRefresh bounds how long the peer list is cached, and how often the
	// peer Service's slices to follow are chosen (endpoints.PeerSlices).
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
	fs.StringVar(&c.PeerService, api.PeerServiceFlag, c.PeerService, "the agent's headless Service (in --pod-namespace) whose endpoints are peers; empty uses only cluster DNS pods")
	fs.IntVar(&c.Peers, "check.network.peers", c.Peers, "pod-to-pod peers on other nodes tried each round; 0 disables pod-to-pod")
	fs.IntVar(&c.MinPeers, "check.network.min-peers", c.MinPeers, "chosen peers that must answer (capped at the number chosen)")
	fs.DurationVar(&c.PeerRefresh, "check.network.peer-refresh", c.PeerRefresh, "longest time the peer list is cached, and shortest between two choices of the peer Service's EndpointSlices to follow")
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
	services := []endpoints.ServiceRef{d.DNSService}
	if c.PeerService != "" {
		peer := endpoints.ServiceRef{Namespace: d.PodNamespace, Name: c.PeerService}
		services = append(services, peer)
		if d.PeerSlices != nil && c.Peers > 0 {
			d.PeerSlices.Follow(peer, d.NodeName, d.PodIP, c.Peers, c.PeerRefresh)
		}
	}
	// The cache is shared with discovery, which refreshes it every round;
	// how long peers may be cached is this check's setting.
	d.Endpoints.MaxAge = c.PeerRefresh
	return &Network{
		KubernetesService: c.KubernetesService, PeerServices: services, Endpoints: d.Endpoints,
		NodeName: d.NodeName, PodIP: d.PodIP, Peers: c.Peers, MinPeers: c.MinPeers, Log: d.Log,
	}
}
