package checks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks/dnsquery"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// DNS resolves in-cluster and external names through the node's resolver.
type DNS struct {
	// Names are resolved in order; each must return at least one address
	// of one of Families.
	Names []string
	// Families are the record types asked for (A for ipv4, AAAA for ipv6);
	// empty asks for both.
	Families IPFamilies
	// Server is the resolver as host:port; empty means the first nameserver of ResolvConf.
	Server string
	// ResolvConf is read when Server is empty (default /etc/resolv.conf).
	ResolvConf string
}

// Name implements Check.
func (*DNS) Name() string { return "dns" }

// Run implements Check.
func (d *DNS) Run(ctx context.Context) error {
	servers, err := d.servers()
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	for _, name := range d.Names {
		if err := resolveAny(ctx, servers, name, d.Families); err != nil {
			return fmt.Errorf("dns: %w", err)
		}
	}
	return nil
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
// succeeds on the first server that answers with an address.
func resolveAny(ctx context.Context, servers []string, name string, families IPFamilies) error {
	var errs []error
	for _, s := range servers {
		err := lookupFamilies(ctx, s, name, families)
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
	fs.Var(&c.ExternalNames, "check.dns.external-names", "comma-separated names outside the cluster the dns check also resolves (such as an internet name); none by default, as air-gapped and private clusters resolve none")
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
	return &DNS{Names: names, Families: d.IPFamilies, Server: c.Server, ResolvConf: c.ResolvConf}
}
