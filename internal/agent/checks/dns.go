package checks

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"

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
	servers, err := ParseResolvConf(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return servers, nil
}

// ParseResolvConf returns the nameservers of a resolv.conf as host:53
// addresses. Lines it does not understand are ignored, as the libc resolver
// does; no nameserver at all is an error.
func ParseResolvConf(r io.Reader) ([]string, error) {
	var servers []string
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		// A zone suffix (fe80::1%eth0) is allowed by glibc; netip keeps it.
		addr, err := netip.ParseAddr(fields[1])
		if err != nil {
			continue
		}
		// A zone netip takes but no address can carry ("::%]") is skipped
		// like any other unusable line.
		server := net.JoinHostPort(addr.String(), "53")
		if _, _, err := net.SplitHostPort(server); err != nil {
			continue
		}
		servers = append(servers, server)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(servers) == 0 {
		return nil, errors.New("no nameserver lines")
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

// lookupFamilies asks server for name's records of each family in turn and
// succeeds on the first family that has an address: in a dual-stack cluster
// a single-stack Service has records of one family only.
// A server that did not answer one family is not asked for the next: the
// time left goes to the next server instead.
func lookupFamilies(ctx context.Context, server, name string, families IPFamilies) error {
	var errs []error
	for _, qtype := range families.qtypes() {
		_, err := lookup(ctx, server, name, qtype)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if errors.As(err, new(noAnswerError)) {
			break
		}
	}
	return errors.Join(errs...)
}

// queryTimeout bounds one query to one server.
const queryTimeout = 2 * time.Second

// noAnswerError is a query its server did not answer (a timeout, a refused
// connection), as opposed to an answer, even garbage, without an address.
type noAnswerError struct{ err error }

func (e noAnswerError) Error() string { return e.err.Error() }
func (e noAnswerError) Unwrap() error { return e.err }

// lookup sends one query of type qtype (A or AAAA) for name to server, over
// UDP and, if the answer is truncated, again over TCP, and returns the
// addresses in the answer.
func lookup(ctx context.Context, server, name string, qtype uint16) ([]netip.Addr, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.RecursionDesired = true
	// At most queryTimeout a query, as a stub resolver's per-try timeout:
	// the client takes ctx's deadline over its own Timeout, so a dead first
	// nameserver would otherwise use all the check's time.
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	c := &dns.Client{Net: "udp", Timeout: remaining(ctx, queryTimeout)}
	resp, _, err := c.ExchangeContext(ctx, q, server)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, q, server)
	}
	if ne := net.Error(nil); errors.As(err, &ne) {
		err = noAnswerError{err}
	} else if err == nil {
		var addrs []netip.Addr
		if addrs, err = AnswerAddrs(q, resp); err == nil {
			return addrs, nil
		}
	}
	return nil, fmt.Errorf("query %s via %s (%s): %w", name, server, dns.TypeToString[qtype], err)
}

// AnswerAddrs validates resp as the answer to q and returns the addresses
// of the type q asks for: A records for an A question, AAAA records for an
// AAAA one (records of the other type are not an answer).
func AnswerAddrs(q, resp *dns.Msg) ([]netip.Addr, error) {
	if resp == nil {
		return nil, errors.New("empty response")
	}
	if resp.Id != q.Id {
		return nil, fmt.Errorf("response id %d does not match query id %d", resp.Id, q.Id)
	}
	if resp.Truncated {
		return nil, errors.New("response truncated")
	}
	if resp.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("server answered %s", rcodeName(resp.Rcode))
	}
	qtype := dns.TypeA
	if len(q.Question) > 0 {
		qtype = q.Question[0].Qtype
	}
	var addrs []netip.Addr
	for _, rr := range resp.Answer {
		if ip, ok := recordAddr(rr, qtype); ok {
			addrs = append(addrs, ip)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no %s record in the answer", dns.TypeToString[qtype])
	}
	return addrs, nil
}

// recordAddr returns the address of rr when it is a record of type qtype.
func recordAddr(rr dns.RR, qtype uint16) (netip.Addr, bool) {
	switch r := rr.(type) {
	case *dns.A:
		if qtype == dns.TypeA {
			ip, ok := netip.AddrFromSlice(r.A)
			return ip.Unmap(), ok && ip.Unmap().Is4()
		}
	case *dns.AAAA:
		if qtype == dns.TypeAAAA {
			ip, ok := netip.AddrFromSlice(r.AAAA)
			return ip, ok && ip.Is6()
		}
	}
	return netip.Addr{}, false
}

func rcodeName(rcode int) string {
	if s, ok := dns.RcodeToString[rcode]; ok {
		return s
	}
	return fmt.Sprintf("rcode %d", rcode)
}

// remaining is the time left before ctx's deadline, or def without one.
func remaining(ctx context.Context, def time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
		return time.Millisecond
	}
	return def
}

// DNSConfig configures the dns check.
type DNSConfig struct {
	// Names are in-cluster names resolved.
	Names flagenv.StringList
	// ExternalNames are names outside the cluster resolved; empty disables that part.
	ExternalNames flagenv.StringList
	// Server is the resolver (host:port); empty means the first nameserver of ResolvConf.
	Server string
	// ResolvConf is the node's resolver configuration.
	ResolvConf string
}

// NewDNSConfig returns the dns check's defaults.
func NewDNSConfig() *DNSConfig {
	return &DNSConfig{
		Names:         flagenv.StringList{"kubernetes.default.svc.cluster.local"},
		ExternalNames: flagenv.StringList{"google.com"},
		ResolvConf:    "/etc/resolv.conf",
	}
}

// AddFlags implements Config.
func (c *DNSConfig) AddFlags(fs *flag.FlagSet) {
	fs.Var(&c.Names, "check.dns.names", "comma-separated in-cluster names the dns check resolves")
	fs.Var(&c.ExternalNames, "check.dns.external-names", "comma-separated external names the dns check resolves; empty disables")
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
