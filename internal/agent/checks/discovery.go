package checks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

// Discovery proves service discovery works end to end: the cluster DNS
// Service has a ready endpoint in its EndpointSlices, and a DNS query sent
// straight to such an endpoint (bypassing the Service IP) is answered.
type Discovery struct {
	// Service is the cluster DNS Service (default kube-system/kube-dns).
	Service endpoints.ServiceRef
	// Endpoints is refreshed every run; the fresh list also feeds the network check's cache.
	Endpoints *endpoints.EndpointCache
	// QueryName is the name asked of the endpoint.
	QueryName string
	// NodeName spreads queries across DNS pods by rendezvous hash.
	NodeName string
	// Families are the record types asked for; an answer of any passes.
	Families IPFamilies
}

// Name implements Check.
func (*Discovery) Name() string { return "discovery" }

// Run implements Check.
func (d *Discovery) Run(ctx context.Context) error {
	eps, err := d.Endpoints.Refresh(ctx, d.Service)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	// Unlike peers, a DNS pod on this very node is a fine target.
	targets := endpoints.RankEndpoints(d.NodeName, eps, len(eps), udpPort, func(endpoints.Endpoint) bool { return false })
	if len(targets) == 0 {
		return fmt.Errorf("discovery: no ready endpoint with a UDP port in the EndpointSlices of %s", d.Service)
	}
	var errs []error
	// Try the endpoints in rendezvous order; one answer is enough.
	for _, t := range targets {
		server := net.JoinHostPort(t.Addr.String(), strconv.Itoa(int(t.UDPPort)))
		if err := lookupFamilies(ctx, server, d.QueryName, d.Families); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return nil
	}
	return fmt.Errorf("discovery: no %s endpoint answered: %w", d.Service, errors.Join(errs...))
}

// DiscoveryConfig configures the discovery check.
type DiscoveryConfig struct {
	// Name is queried directly at a cluster DNS endpoint.
	Name string
}

// NewDiscoveryConfig returns the discovery check's defaults.
func NewDiscoveryConfig() *DiscoveryConfig {
	return &DiscoveryConfig{Name: "kubernetes.default.svc.cluster.local"}
}

// AddFlags implements Config.
func (c *DiscoveryConfig) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Name, "check.discovery.name", c.Name, "name queried directly at a cluster DNS endpoint")
}

// Validate implements Config.
func (c *DiscoveryConfig) Validate(enabled bool) []error {
	if enabled && c.Name == "" {
		return []error{errors.New("--check.discovery.name: required by the discovery check")}
	}
	return nil
}

// Build implements Config.
func (c *DiscoveryConfig) Build(d Deps) Check {
	return &Discovery{Service: d.DNSService, Endpoints: d.Endpoints, QueryName: c.Name, NodeName: d.NodeName, Families: d.IPFamilies}
}

// udpPort is an endpoint's DNS port.
func udpPort(ep endpoints.Endpoint) int32 { return ep.UDPPort }
