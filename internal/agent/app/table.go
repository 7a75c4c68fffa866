package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/gates"
)

// Gate names: checks that are enabled by their own flags rather than
// --checks, and that are bootstrap checks unless --continuous-checks names them.
const (
	GateDaemonSets        = "daemonsets"
	GateConditions        = "conditions"
	GateCSIDrivers        = "csidrivers"
	GateExtendedResources = "extendedresources"
	GateDRA               = "dra"
)

// checkTable lists every check and gate the agent knows, in the order they
// are reported, each with a fresh configuration holding its defaults.
// Adding a check is its file under internal/agent/checks (a gate's under
// internal/agent/gates: the check and its Config), its test, and one row
// here; a gate's Config also says when its own flags enable it
// (checks.GateConfig).
func checkTable() []checkRow {
	return []checkRow{
		{"dns", checks.NewDNSConfig()},
		{"api", checks.APIConfig{}},
		{"network", checks.NewNetworkConfig()},
		{"discovery", checks.NewDiscoveryConfig()},
		{"probe", &checks.ProbeConfig{}},
		{GateConditions, gates.NewConditionsConfig()},
		{GateDaemonSets, gates.NewDaemonSetsConfig()},
		{GateCSIDrivers, &gates.CSIDriversConfig{}},
		{GateExtendedResources, &gates.ExtendedResourcesConfig{}},
		{GateDRA, &gates.DRAConfig{}},
	}
}

type checkRow struct {
	name   string
	config checks.Config
}

// gate returns the row's gate configuration, or nil when the row is a
// check that --checks enables.
func (r checkRow) gate() checks.GateConfig {
	g, _ := r.config.(checks.GateConfig)
	return g
}

func names(gates bool) []string {
	var out []string
	for _, r := range checkTable() {
		if (r.gate() != nil) == gates {
			out = append(out, r.name)
		}
	}
	return out
}

// AllChecks lists the checks --checks may name, in the order they are reported.
var AllChecks = names(false)

// Gates lists the gate names.
var Gates = names(true)

// enabled reports whether the row's check or gate runs.
func (o *Options) enabled(r checkRow) bool {
	if g := r.gate(); g != nil {
		return g.Enabled()
	}
	return slices.Contains(o.Checks, r.name)
}

// Build returns the enabled checks and gates, in the order of the table:
// what the agent runs. Their EndpointSlice reads follow watches, which run
// until ctx ends or the returned PeerSlices' Stop, and start again at the
// next read: of the peer Service, only the slices this node ranks first.
func Build(ctx context.Context, c *Config, client agent.Clientset, log *slog.Logger) ([]checks.Check, *endpoints.PeerSlices, error) {
	peers := endpoints.NewPeerSlices(ctx, client, log, endpoints.NewSliceWatcher(ctx, client, log))
	cs, err := build(c, client, log, peers, peers, true)
	return cs, peers, err
}

// BuildChecks returns the enabled checks without the gates, which need the
// agent's loop: what the check command runs, once, so its EndpointSlice
// reads are lists.
func BuildChecks(c *Config, client agent.Clientset, log *slog.Logger) ([]checks.Check, error) {
	return build(c, client, log, &endpoints.SliceLister{Client: client}, nil, false)
}

// build makes the enabled rows' checks. The network and discovery checks
// share one endpoint cache on lister, so the fresh kube-dns read of
// discovery also serves as the network check's peer list. peers, when
// set, is lister too, and follows the network check's peer Service.
func build(c *Config, client agent.Clientset, log *slog.Logger, lister endpoints.EndpointLister, peers *endpoints.PeerSlices, gates bool) ([]checks.Check, error) {
	d := checks.Deps{
		Client:       client,
		Endpoints:    &endpoints.EndpointCache{Source: lister},
		PeerSlices:   peers,
		DNSService:   c.DNSService,
		IPFamilies:   c.IPFamilies(),
		Kube:         client.CS,
		Resources:    client,
		NodeName:     c.NodeName,
		PodIP:        c.PodIP,
		PodName:      c.PodName,
		PodNamespace: c.PodNamespace,
		AgentTaints:  c.AgentTaints,
		Log:          log,
		Clock:        c.Agent.Clock,
	}
	var out []checks.Check
	for _, r := range c.rows {
		if gates || r.gate() == nil {
			out = append(out, r.config.Build(d))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no known check enabled in %q", c.checksFlag)
	}
	return out, nil
}
