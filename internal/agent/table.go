package agent

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// checkTable lists every check the agent knows, in the order they are
// reported, each with a fresh configuration holding its defaults. Adding a
// check is its file under internal/agent/checks (the check and its Config), its
// test, and one row here.
func checkTable() []checkRow {
	return []checkRow{
		{"dns", checks.NewDNSConfig()},
		{"api", checks.APIConfig{}},
		{"network", checks.NewNetworkConfig()},
		{"discovery", checks.NewDiscoveryConfig()},
		{"probe", &checks.ProbeConfig{}},
	}
}

type checkRow struct {
	name   string
	config checks.Config
}

// AllChecks lists the checks the agent knows, in the order they are reported.
var AllChecks = func() []string {
	var names []string
	for _, r := range checkTable() {
		names = append(names, r.name)
	}
	return names
}()

// CheckClient is what the checks read from the API server: the agent's own
// node and EndpointSlices.
type CheckClient interface {
	checks.NodeGetter
	checks.SliceClient
}

// BuildChecks returns the enabled checks, in the order of AllChecks. The
// network and discovery checks share one endpoint cache, so the fresh
// kube-dns read of discovery also serves as the network check's peer list.
func BuildChecks(o *Options, client CheckClient, log *slog.Logger) ([]checks.Check, error) {
	dnsService, err := checks.ParseServiceRef(o.DNSService)
	if err != nil {
		return nil, err
	}
	podIP, _ := netip.ParseAddr(o.PodIP)
	d := checks.Deps{
		Client:       client,
		Endpoints:    &checks.EndpointCache{Source: &checks.SliceLister{Client: client}},
		DNSService:   dnsService,
		NodeName:     o.NodeName,
		PodIP:        podIP,
		PodNamespace: o.PodNamespace,
		Log:          log,
	}
	var out []checks.Check
	for _, r := range o.checks {
		if slices.Contains(o.Checks, r.name) {
			out = append(out, r.config.Build(d))
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
