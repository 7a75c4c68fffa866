// Package endpoints is how the agent reads the Services its checks use:
// EndpointSlices flattened into endpoints, ranked by rendezvous hash and
// cached for a round; the peer Service followed by watches on only the
// slices this node ranks first.
package endpoints

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// ServiceRef names a Service.
type ServiceRef struct {
	Namespace, Name string
}

func (s ServiceRef) String() string { return s.Namespace + "/" + s.Name }

// ParseServiceRef parses "namespace/name".
func ParseServiceRef(s string) (ServiceRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if ok && ns != "" && name != "" {
		return ServiceRef{Namespace: ns, Name: name}, nil
	}
	return ServiceRef{}, fmt.Errorf("service %q: want namespace/name", s)
}

// Endpoint is one address of a Service, as its EndpointSlice lists it.
type Endpoint struct {
	// Addr is the endpoint's IP address; invalid when the slice gave none usable.
	Addr netip.Addr
	// NodeName is the node the endpoint runs on, if the slice says.
	NodeName string
	// Ready is the endpoint's ready condition (unset counts as ready, as the API documents).
	Ready bool
	// TCPPort and UDPPort are the first ports of each protocol in the endpoint's slice (0: none).
	TCPPort, UDPPort int32
}

// EndpointsFromSlices flattens EndpointSlices into endpoints. Slices of FQDN
// type and addresses that do not parse are skipped.
func EndpointsFromSlices(slices []discoveryv1.EndpointSlice) []Endpoint {
	var out []Endpoint
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var tcp, udp int32
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			switch {
			case proto == corev1.ProtocolTCP && tcp == 0:
				tcp = *p.Port
			case proto == corev1.ProtocolUDP && udp == 0:
				udp = *p.Port
			}
		}
		for _, e := range s.Endpoints {
			ep := Endpoint{Ready: e.Conditions.Ready == nil || *e.Conditions.Ready, TCPPort: tcp, UDPPort: udp}
			if e.NodeName != nil {
				ep.NodeName = *e.NodeName
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					ep.Addr = ip
					break
				}
			}
			out = append(out, ep)
		}
	}
	return out
}

// EndpointLister returns the endpoints of a Service.
type EndpointLister interface {
	Endpoints(ctx context.Context, svc ServiceRef) ([]Endpoint, error)
}

// SliceClient lists EndpointSlices.
type SliceClient interface {
	ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
}

// SliceLister lists a Service's EndpointSlices from the API server's watch
// cache (resourceVersion=0): cheap for the API server and etcd, and fresh
// enough for picking peers.
type SliceLister struct {
	Client SliceClient
}

// Endpoints implements EndpointLister.
func (l *SliceLister) Endpoints(ctx context.Context, svc ServiceRef) ([]Endpoint, error) {
	list, err := l.Client.ListEndpointSlices(ctx, svc.Namespace, metav1.ListOptions{
		LabelSelector:   discoveryv1.LabelServiceName + "=" + svc.Name,
		ResourceVersion: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices of %s: %w", svc, err)
	}
	return EndpointsFromSlices(list.Items), nil
}

// EndpointCache keeps each Service's endpoints for up to MaxAge and serves the
// last good list when a refresh fails, so an API hiccup does not turn into a
// network-check failure.
type EndpointCache struct {
	// Source is read when an entry is missing or older than MaxAge.
	Source EndpointLister
	// MaxAge bounds how stale an entry may be before it is refreshed.
	MaxAge time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	entries map[ServiceRef]cacheEntry
}

type cacheEntry struct {
	endpoints []Endpoint
	at        time.Time
}

func (c *EndpointCache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Endpoints implements EndpointLister from the cache.
func (c *EndpointCache) Endpoints(ctx context.Context, svc ServiceRef) ([]Endpoint, error) {
	c.mu.Lock()
	e, ok := c.entries[svc]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < c.MaxAge {
		return e.endpoints, nil
	}
	eps, err := c.Refresh(ctx, svc)
	if err != nil && ok {
		return e.endpoints, nil
	}
	return eps, err
}

// Refresh reads svc's endpoints from the source now and caches them.
func (c *EndpointCache) Refresh(ctx context.Context, svc ServiceRef) ([]Endpoint, error) {
	eps, err := c.Source.Endpoints(ctx, svc)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[ServiceRef]cacheEntry)
	}
	c.entries[svc] = cacheEntry{endpoints: eps, at: c.now()}
	c.mu.Unlock()
	return eps, nil
}

// SelectPeers returns up to n peers for pod-to-pod checks: endpoints with a
// TCP port that are not on this node (by node name or address).
func SelectPeers(self string, selfAddr netip.Addr, candidates []Endpoint, n int) []Endpoint {
	return RankEndpoints(self, candidates, n, tcpPort, func(ep Endpoint) bool {
		return (self != "" && ep.NodeName == self) || ep.Addr == selfAddr
	})
}

// RankEndpoints returns up to n distinct endpoints that are ready, have an
// address and a port (per port), and are not skipped, ranked by rendezvous
// (highest-random-weight) hash of key and the address: each node picks a
// stable set, and across nodes the load spreads evenly.
func RankEndpoints(key string, candidates []Endpoint, n int, port func(Endpoint) int32, skip func(Endpoint) bool) []Endpoint {
	type scored struct {
		ep    Endpoint
		score uint64
	}
	seen := make(map[netip.Addr]bool)
	var pool []scored
	for _, ep := range candidates {
		if !ep.Ready || !ep.Addr.IsValid() || port(ep) == 0 || seen[ep.Addr] || skip(ep) {
			continue
		}
		seen[ep.Addr] = true
		pool = append(pool, scored{ep, api.Rendezvous(key, ep.Addr.String())})
	}
	sort.Slice(pool, func(i, j int) bool {
		if pool[i].score != pool[j].score {
			return pool[i].score > pool[j].score
		}
		return pool[i].ep.Addr.Less(pool[j].ep.Addr)
	})
	if len(pool) > n {
		pool = pool[:n]
	}
	out := make([]Endpoint, len(pool))
	for i, s := range pool {
		out[i] = s.ep
	}
	return out
}

func tcpPort(ep Endpoint) int32 { return ep.TCPPort }
