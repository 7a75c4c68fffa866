package agent

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"text/tabwriter"

	"github.com/kube-node-ready/kube-node-ready/internal/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/kube"
)

// checkTable builds each known check from the options; adding a check means
// adding its file under internal/checks and one entry here.
var checkTable = map[string]func(o *Options, d deps) checks.Check{
	"dns": func(o *Options, _ deps) checks.Check {
		names := append(append([]string(nil), o.DNSNames...), o.DNSExternalNames...)
		return &checks.DNS{Names: names, Server: o.DNSServer, ResolvConf: o.ResolvConf}
	},
	"api": func(o *Options, d deps) checks.Check {
		return &checks.API{Client: d.client, NodeName: o.NodeName}
	},
	"network": func(o *Options, d deps) checks.Check {
		services := []checks.ServiceRef{d.dnsService}
		if o.PeerService != "" {
			services = append(services, checks.ServiceRef{Namespace: o.PodNamespace, Name: o.PeerService})
		}
		podIP, _ := netip.ParseAddr(o.PodIP)
		return &checks.Network{
			KubernetesService: o.KubernetesService, PeerServices: services, Endpoints: d.endpoints,
			NodeName: o.NodeName, PodIP: podIP, Peers: o.Peers, MinPeers: o.MinPeers, Log: d.log,
		}
	},
	"discovery": func(o *Options, d deps) checks.Check {
		return &checks.Discovery{Service: d.dnsService, Endpoints: d.endpoints, QueryName: o.DiscoveryName, NodeName: o.NodeName}
	},
	"probe": func(o *Options, _ deps) checks.Check {
		var targets []checks.ProbeTarget
		for _, s := range o.ProbeTargets {
			t, _ := checks.ParseProbeTarget(s) // Validate has refused bad ones
			targets = append(targets, t)
		}
		return checks.NewProbe(targets)
	},
}

type deps struct {
	client     *kube.Client
	endpoints  *checks.EndpointCache
	dnsService checks.ServiceRef
	log        *slog.Logger
}

// BuildChecks returns the enabled checks, in the order of AllChecks. The
// network and discovery checks share one endpoint cache, so the fresh
// kube-dns read of discovery also serves as the network check's peer list.
func BuildChecks(o *Options, client *kube.Client, log *slog.Logger) ([]checks.Check, error) {
	dnsService, err := checks.ParseServiceRef(o.DNSService)
	if err != nil {
		return nil, err
	}
	d := deps{
		client:     client,
		endpoints:  &checks.EndpointCache{Source: &checks.SliceLister{Client: client}, MaxAge: o.PeerRefresh},
		dnsService: dnsService,
		log:        log,
	}
	var out []checks.Check
	for _, name := range AllChecks {
		for _, enabled := range o.Checks {
			if enabled == name {
				out = append(out, checkTable[name](o, d))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no known check enabled in %q", strings.Join(o.Checks, ","))
	}
	return out, nil
}

// PrintRound writes a round as a table: check, result, duration, error.
func PrintRound(w io.Writer, r checks.Round) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDURATION\tERROR")
	for _, res := range r.Results {
		result, msg := "pass", ""
		if res.Err != nil {
			result, msg = "FAIL", strings.ReplaceAll(res.Err.Error(), "\n", " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Name, result, res.Duration.Round(100*1000), msg)
	}
	verdict := "all checks passed"
	if !r.Passed() {
		verdict = "FAILED: " + strings.Join(r.Failed(), ", ")
	}
	fmt.Fprintf(tw, "\nround took %s: %s\n", r.Duration.Round(100*1000), verdict)
	return tw.Flush()
}
