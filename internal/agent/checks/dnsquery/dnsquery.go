// Package dnsquery is the DNS the agent's checks speak on the wire: the
// node's resolv.conf read, one query to one server, and the answer
// checked. It holds what parses input from outside the agent (a resolver
// configuration, a server's bytes), so it is small and fuzzed on its own.
package dnsquery

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

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

// QueryTimeout bounds one query to one server.
const QueryTimeout = 2 * time.Second

// NoAnswerError is a query its server did not answer (a timeout, a refused
// connection), as opposed to an answer, even garbage, without an address.
type NoAnswerError struct{ err error }

func (e NoAnswerError) Error() string { return e.err.Error() }
func (e NoAnswerError) Unwrap() error { return e.err }

// RcodeError is an answer whose response code is not success: NXDOMAIN,
// SERVFAIL, REFUSED and the like.
type RcodeError struct {
	// Rcode is the response code (dns.RcodeNameError, ...).
	Rcode int
}

func (e RcodeError) Error() string { return "server answered " + rcodeName(e.Rcode) }

// Lookup sends one query of type qtype (A or AAAA) for name to server, over
// UDP and, if the answer is truncated, again over TCP, and returns the
// addresses in the answer. A server that gives no answer (a timeout, a
// refused connection) is a NoAnswerError.
func Lookup(ctx context.Context, server, name string, qtype uint16) ([]netip.Addr, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	resp, err := exchange(ctx, server, q)
	if err == nil {
		var addrs []netip.Addr
		if addrs, err = AnswerAddrs(q, resp); err == nil {
			return addrs, nil
		}
	}
	return nil, fmt.Errorf("query %s via %s (%s): %w", name, server, dns.TypeToString[qtype], err)
}

// LookupPTR asks server for the names of addr (a PTR query of its reverse
// name): the cluster DNS answers one for a Service's ClusterIP,
// <service>.<namespace>.svc.<cluster domain>. A server that gives no
// answer is a NoAnswerError; a name without PTR records (NXDOMAIN, an empty
// answer) is an error too.
func LookupPTR(ctx context.Context, server string, addr netip.Addr) ([]string, error) {
	rev, err := dns.ReverseAddr(addr.Unmap().WithZone("").String())
	if err != nil {
		return nil, fmt.Errorf("reverse name of %s: %w", addr, err)
	}
	q := new(dns.Msg)
	q.SetQuestion(rev, dns.TypePTR)
	resp, err := exchange(ctx, server, q)
	if err == nil {
		var names []string
		if names, err = AnswerPTRs(q, resp); err == nil {
			return names, nil
		}
	}
	return nil, fmt.Errorf("query %s via %s (PTR): %w", rev, server, err)
}

// exchange sends q to server over UDP and, if the answer is truncated,
// again over TCP. A server that gives no answer is a NoAnswerError.
func exchange(ctx context.Context, server string, q *dns.Msg) (*dns.Msg, error) {
	q.RecursionDesired = true
	// At most QueryTimeout a query, as a stub resolver's per-try timeout:
	// the client takes ctx's deadline over its own Timeout, so a dead first
	// nameserver would otherwise use all the check's time.
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	c := &dns.Client{Net: "udp", Timeout: remaining(ctx, QueryTimeout)}
	resp, _, err := c.ExchangeContext(ctx, q, server)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, q, server)
	}
	if ne := net.Error(nil); errors.As(err, &ne) {
		return nil, NoAnswerError{err}
	}
	return resp, err
}

// AnswerAddrs validates resp as the answer to q and returns the addresses
// of the type q asks for: A records for an A question, AAAA records for an
// AAAA one (records of the other type are not an answer).
func AnswerAddrs(q, resp *dns.Msg) ([]netip.Addr, error) {
	qtype, err := validAnswer(q, resp)
	if err != nil {
		return nil, err
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

// AnswerPTRs validates resp as the answer to the PTR question q and returns
// the names its PTR records point to, fully qualified.
func AnswerPTRs(q, resp *dns.Msg) ([]string, error) {
	if _, err := validAnswer(q, resp); err != nil {
		return nil, err
	}
	var names []string
	for _, rr := range resp.Answer {
		if ptr, ok := rr.(*dns.PTR); ok && ptr.Ptr != "" {
			names = append(names, dns.Fqdn(ptr.Ptr))
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no PTR record in the answer")
	}
	return names, nil
}

// validAnswer checks resp is a complete, successful answer to q and
// returns the type q asks for.
func validAnswer(q, resp *dns.Msg) (uint16, error) {
	if resp == nil {
		return 0, errors.New("empty response")
	}
	if resp.Id != q.Id {
		return 0, fmt.Errorf("response id %d does not match query id %d", resp.Id, q.Id)
	}
	if resp.Truncated {
		return 0, errors.New("response truncated")
	}
	if resp.Rcode != dns.RcodeSuccess {
		return 0, RcodeError{Rcode: resp.Rcode}
	}
	qtype := dns.TypeA
	if len(q.Question) > 0 {
		qtype = q.Question[0].Qtype
	}
	return qtype, nil
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
