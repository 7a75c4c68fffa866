package checks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
