package checks

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fakeResolver is a real DNS server on loopback whose answers the test chooses.
func fakeResolver(t *testing.T, handler dns.HandlerFunc) string {
	t.Helper()
	return fakeResolverOn(t, "127.0.0.1", handler)
}

// fakeResolverOn is fakeResolver on the address ip (such as ::1).
func fakeResolverOn(t *testing.T, ip string, handler dns.HandlerFunc) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: handler}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

func answerA(ip string) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		w.WriteMsg(m)
	}
}

// TestDNSCheck: the dns check asks for the records of the families it is
// given (none: both) and a name passes when any of them resolves; every
// failure is a dns: error with its reason.
func TestDNSCheck(t *testing.T) {
	v4only, v6only, both := answerFamilies("10.96.0.1", ""), answerFamilies("", "fd00::1"), answerFamilies("10.96.0.1", "fd00::1")
	dual := IPFamilies{IPv4, IPv6}
	tests := []struct {
		name     string
		families IPFamilies
		handler  dns.HandlerFunc
		// wantErr and alsoErr are in the error; none means the check passes.
		wantErr, alsoErr string
	}{
		{name: "answers", handler: answerA("10.96.0.1")},
		{name: "nxdomain", handler: func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeNameError)
			w.WriteMsg(m)
		}, wantErr: "NXDOMAIN"},
		{name: "servfail", handler: func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeServerFailure)
			w.WriteMsg(m)
		}, wantErr: "SERVFAIL"},
		{name: "empty answer", handler: func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			w.WriteMsg(m)
		}, wantErr: "no A record"},
		{name: "garbage bytes", handler: func(w dns.ResponseWriter, r *dns.Msg) {
			w.Write([]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3})
		}, wantErr: "query kubernetes.default.svc.cluster.local via"},
		{name: "wrong id", handler: func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			m.Id = r.Id + 1
			w.WriteMsg(m)
		}, wantErr: "dns:"},
		{name: "truncated and no tcp", handler: func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			m.Truncated = true
			w.WriteMsg(m)
		}, wantErr: "tcp"},
		{name: "silent", handler: func(dns.ResponseWriter, *dns.Msg) {}, wantErr: "timeout"},
		{name: "ipv4 asks A", families: IPFamilies{IPv4}, handler: v4only},
		{name: "ipv4 with AAAA only fails", families: IPFamilies{IPv4}, handler: v6only, wantErr: "no A record"},
		{name: "ipv6 asks AAAA", families: IPFamilies{IPv6}, handler: v6only},
		{name: "ipv6 with A only fails", families: IPFamilies{IPv6}, handler: v4only, wantErr: "no AAAA record"},
		{name: "ipv6 with A records in an AAAA answer fails", families: IPFamilies{IPv6}, handler: aForAAAA, wantErr: "no AAAA record"},
		{name: "ipv6 with garbage fails", families: IPFamilies{IPv6}, handler: garbageFor(dns.TypeAAAA, v6only), wantErr: "(AAAA)"},
		{name: "dual-stack with A only passes", families: dual, handler: v4only},
		{name: "dual-stack with AAAA only passes", families: dual, handler: v6only},
		{name: "dual-stack with both passes", families: dual, handler: both},
		{name: "dual-stack with garbage for A and an AAAA passes", families: dual, handler: garbageFor(dns.TypeA, v6only)},
		{name: "dual-stack with neither fails naming both", families: dual, handler: answerFamilies("", ""), wantErr: "no A record", alsoErr: "no AAAA record"},
		{name: "no families asks for both", handler: v6only},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := fakeResolver(t, tt.handler)
			c := &DNS{Names: []string{"kubernetes.default.svc.cluster.local"}, Families: tt.families, Server: server}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := c.Run(ctx)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Run = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.alsoErr) || !strings.HasPrefix(err.Error(), "dns: ") {
				t.Errorf("Run = %v, want a dns: error mentioning %q %q", err, tt.wantErr, tt.alsoErr)
			}
		})
	}
}

func TestDNSCheckResolvConf(t *testing.T) {
	dir := t.TempDir()
	if err := (&DNS{Names: []string{"x"}, ResolvConf: filepath.Join(dir, "missing")}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "read resolver configuration") {
		t.Errorf("missing resolv.conf: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("search x\n"), 0o644)
	if err := (&DNS{Names: []string{"x"}, ResolvConf: empty}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no nameserver") {
		t.Errorf("resolv.conf without nameserver: %v", err)
	}
}

// TestDNSConfigDefaultsStayInTheCluster: by default the dns check resolves
// in-cluster names only, so an air-gapped or private cluster passes it;
// external names are opt-in and resolved after the in-cluster ones.
func TestDNSConfigDefaultsStayInTheCluster(t *testing.T) {
	build := func(args ...string) (*DNSConfig, *DNS) {
		t.Helper()
		c := NewDNSConfig()
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		c.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return c, c.Build(Deps{}).(*DNS)
	}
	if _, d := build(); !reflect.DeepEqual(d.Names, []string{"kubernetes.default.svc.cluster.local"}) {
		t.Errorf("default names %q, want the kubernetes Service's alone", d.Names)
	}
	if _, d := build("--check.dns.external-names=example.com"); !reflect.DeepEqual(d.Names, []string{"kubernetes.default.svc.cluster.local", "example.com"}) {
		t.Errorf("with an external name: %q", d.Names)
	}
	if c, _ := build("--check.dns.names="); len(c.Validate(true)) == 0 {
		t.Error("no name at all: Validate passed")
	}
}
