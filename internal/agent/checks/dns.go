package checks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks/dnsquery"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// DNS resolves in-cluster and external names through the node's resolver.
// A name that fails through the cluster DNS Service's address is asked of
// the Service's endpoints directly (see askBackends): the node fails only
// when it cannot resolve through any of them, and an endpoint that fails
// while others answer is reported as degraded, not counted against the node.
type DNS struct {
	// Names are resolved, all at once; each must return at least one
	// address of one of Families.
	Names []string
	// Families are the record types asked for (A for ipv4, AAAA for ipv6);
	// empty asks for both.
	Families IPFamilies
	// Server is the resolver as host:port; empty means the first nameserver of ResolvConf.
	Server string
	// ResolvConf is read when Server is empty (default /etc/resolv.conf).
	ResolvConf string
	// Service is the cluster DNS Service; with Endpoints, a failure through
	// its address is asked of its endpoints directly. Zero turns that off.
	Service endpoints.ServiceRef
	// Endpoints serves Service's endpoints (the EndpointSlice cache the
	// discovery and network checks share); nil turns the direct asking off.
	Endpoints endpoints.EndpointLister
	// NodeName ranks the endpoints asked directly, so the load spreads.
	NodeName string

	// addrs remembers which nameservers are Service's own addresses.
	addrs serviceAddrs
	// report hears of the endpoints asked directly; nil tells no one.
	report BackendReporter
}

// Name implements Check.
func (*DNS) Name() string { return "dns" }

func (d *DNS) reportBackendsTo(r BackendReporter) { d.report = r }

// Run implements Check. The names are resolved at once, so the check takes
// as long as its slowest name.
func (d *DNS) Run(ctx context.Context) error {
	servers, err := d.servers()
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	results := make([]nameResult, len(d.Names))
	var wg sync.WaitGroup
	for i, name := range d.Names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = d.resolve(ctx, servers, name)
		}()
	}
	wg.Wait()
	var errs []error
	var seen []BackendState
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
		}
		seen = append(seen, r.backends...)
	}
	if d.report != nil {
		d.report.Backends(d.Name(), d.Service, seen)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("dns: "+strings.TrimSuffix(strings.Repeat("%w; ", len(errs)), "; "), toAny(errs)...)
}

// nameResult is how one name fared.
type nameResult struct {
	// err is nil when the name resolved (or only a backend failed it).
	err error
	// backends are the Service's endpoints asked directly, if any were.
	backends []BackendState
}

func toAny(errs []error) []any {
	out := make([]any, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return out
}

func (d *DNS) servers() ([]string, error) {
	if d.Server != "" {
		return []string{d.Server}, nil
	}
	path := d.ResolvConf
	if path == "" {
		path = "/etc/resolv.conf"
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read resolver configuration: %w", err)
	}
	defer f.Close()
	servers, err := dnsquery.ParseResolvConf(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return servers, nil
}

// resolveAny asks each server in turn, as a stub resolver fails over, and
// succeeds on the first server that answers with an address. Each server
// gets an equal share of the time left, so a dead first one leaves time for
// the next.
func resolveAny(ctx context.Context, servers []string, name string, families IPFamilies) error {
	var errs []error
	for i, s := range servers {
		sctx, cancel := shareOf(ctx, 1/float64(len(servers)-i))
		err := lookupFamilies(sctx, s, name, families)
		cancel()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// lookupFamilies asks server for name's records of every family at once,
// as glibc's stub resolver asks A and AAAA, and succeeds on the first
// family that has an address: in a dual-stack cluster a single-stack
// Service has records of one family only. One family's question going
// unanswered (a server or a path that drops A questions in a cluster whose
// primary family is IPv6) does not keep the other from being asked, and a
// dead server costs one query timeout, not one per family.
func lookupFamilies(ctx context.Context, server, name string, families IPFamilies) error {
	qtypes := families.qtypes()
	if len(qtypes) == 1 {
		_, err := dnsquery.Lookup(ctx, server, name, qtypes[0])
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(qtypes))
	done := make(chan int, len(qtypes))
	for i, qtype := range qtypes {
		go func() {
			_, errs[i] = dnsquery.Lookup(ctx, server, name, qtype)
			done <- i
		}()
	}
	for range qtypes {
		if i := <-done; errs[i] == nil {
			return nil
		}
	}
	// Every query has ended: errs is complete, in the families' order.
	return errors.Join(errs...)
}

// shareOf returns ctx cut to share (0 to 1) of the time left before its
// deadline; without a deadline, ctx as it is.
func shareOf(ctx context.Context, share float64) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok || share >= 1 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, time.Now().Add(time.Duration(share*float64(time.Until(dl)))))
}

// DNSConfig configures the dns check.
type DNSConfig struct {
	// Names are in-cluster names resolved.
	Names flagenv.StringList
	// ExternalNames are names outside the cluster resolved too: opt-in
	// (none by default), as air-gapped and private clusters resolve no
	// internet name and every node there would fail.
	ExternalNames flagenv.StringList
	// Server is the resolver (host:port); empty means the first nameserver of ResolvConf.
	Server string
	// ResolvConf is the node's resolver configuration.
	ResolvConf string
}

// NewDNSConfig returns the dns check's defaults.
func NewDNSConfig() *DNSConfig {
	return &DNSConfig{
		Names:      flagenv.StringList{"kubernetes.default.svc.cluster.local"},
		ResolvConf: "/etc/resolv.conf",
	}
}

// AddFlags implements Config.
func (c *DNSConfig) AddFlags(fs *flag.FlagSet) {
	fs.Var(&c.Names, "check.dns.names", "comma-separated in-cluster names the dns check resolves")
	fs.Var(&c.ExternalNames, api.ExternalNamesFlag, "comma-separated names outside the cluster the dns check also resolves (such as an internet name); none by default, as air-gapped and private clusters resolve none")
	fs.StringVar(&c.Server, "check.dns.server", c.Server, "resolver host:port for the dns check; empty uses the first nameserver of --check.dns.resolv-conf")
	fs.StringVar(&c.ResolvConf, "check.dns.resolv-conf", c.ResolvConf, "resolver configuration of the node")
}

// Validate implements Config.
func (c *DNSConfig) Validate(enabled bool) []error {
	var errs []error
	if enabled && len(c.Names)+len(c.ExternalNames) == 0 {
		errs = append(errs, errors.New("--check.dns.names: the dns check has no name to resolve"))
	}
	if c.Server != "" {
		if _, _, err := net.SplitHostPort(c.Server); err != nil {
			errs = append(errs, fmt.Errorf("--check.dns.server: want host:port: %v", err))
		}
	}
	return errs
}

// Build implements Config.
func (c *DNSConfig) Build(d Deps) Check {
	names := append(append([]string(nil), c.Names...), c.ExternalNames...)
	dns := &DNS{Names: names, Families: d.IPFamilies, Server: c.Server, ResolvConf: c.ResolvConf, Service: d.DNSService, NodeName: d.NodeName}
	dns.addrs.clock = d.Clock
	if d.Endpoints != nil {
		dns.Endpoints = d.Endpoints
	}
	return dns
}
