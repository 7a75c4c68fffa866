package checks

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

func TestJudgeBackends(t *testing.T) {
	ok := func(ip string) BackendState {
		return BackendState{Endpoint: endpoints.Endpoint{Addr: netip.MustParseAddr(ip)}}
	}
	bad := func(ip string) BackendState {
		return BackendState{Endpoint: endpoints.Endpoint{Addr: netip.MustParseAddr(ip)}, Err: errors.New("timeout")}
	}
	tests := []struct {
		name       string
		states     []BackendState
		want       backendVerdict
		wantFailed int
	}{
		{name: "one of two fails", states: []BackendState{ok("10.0.0.1"), bad("10.0.0.2")}, want: backendsDegraded, wantFailed: 1},
		{name: "two of three fail", states: []BackendState{bad("10.0.0.1"), ok("10.0.0.2"), bad("10.0.0.3")}, want: backendsDegraded, wantFailed: 2},
		{name: "all answer", states: []BackendState{ok("10.0.0.1"), ok("10.0.0.2")}, want: everyBackendAnswers},
		{name: "none answers", states: []BackendState{bad("10.0.0.1"), bad("10.0.0.2")}, want: noBackendAnswers, wantFailed: 2},
		{name: "the only one answers", states: []BackendState{ok("10.0.0.1")}, want: everyBackendAnswers},
		{name: "the only one fails", states: []BackendState{bad("10.0.0.1")}, want: noBackendAnswers, wantFailed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, failed := judgeBackends(tt.states)
			if got != tt.want || len(failed) != tt.wantFailed {
				t.Errorf("judgeBackends = %v with %d failed, want %v with %d", got, len(failed), tt.want, tt.wantFailed)
			}
		})
	}
}

func TestIsServiceName(t *testing.T) {
	svc := endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}
	tests := []struct {
		name string
		want bool
	}{
		{"kube-dns.kube-system.svc.cluster.local.", true},
		{"kube-dns.kube-system.svc.cluster.local", true},
		{"KUBE-DNS.Kube-System.svc.example.internal.", true},
		{"kube-dns.kube-system.svc.", false},
		{"coredns.kube-system.svc.cluster.local.", false},
		{"kube-dns.default.svc.cluster.local.", false},
		{"10-96-0-10.kube-dns.kube-system.svc.cluster.local.", false},
		{"kube-dns.kube-system.pod.cluster.local.", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isServiceName(tt.name, svc); got != tt.want {
			t.Errorf("isServiceName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// dnsServerFor is a fake DNS server at ip (a 127.0.0.0/8 address of its
// own, as endpoints.RankEndpoints tells endpoints apart by address) and its endpoint.
type dnsServerFor struct {
	addr string
	ep   endpoints.Endpoint
}

func fakeEndpoint(t *testing.T, ip string, handler dns.HandlerFunc) dnsServerFor {
	t.Helper()
	addr := fakeResolverOn(t, ip, handler)
	return dnsServerFor{addr: addr, ep: endpointOf(t, addr)}
}

// coreDNS answers A questions with 10.96.0.1 and PTR questions with ptr
// (none: NXDOMAIN), as the cluster DNS does for a Service's ClusterIP.
func coreDNS(ptr string) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		q := r.Question[0]
		m := new(dns.Msg)
		switch {
		case q.Qtype == dns.TypePTR && ptr == "":
			m.SetRcode(r, dns.RcodeNameError)
		case q.Qtype == dns.TypePTR:
			m.SetReply(r)
			m.Answer = append(m.Answer, &dns.PTR{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 5}, Ptr: ptr})
		default:
			answerFamilies("10.96.0.1", "")(w, r)
			return
		}
		w.WriteMsg(m)
	}
}

// cutUpstream answers PTR questions as coreDNS(ptr) and nothing else: a
// cluster DNS replica whose forwarded queries die.
func cutUpstream(ptr string) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Question[0].Qtype == dns.TypePTR {
			coreDNS(ptr)(w, r)
		}
	}
}

// silent answers nothing: a backend whose forwarded queries die.
func silent(dns.ResponseWriter, *dns.Msg) {}

func servfail(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeServerFailure)
	w.WriteMsg(m)
}

// recordedBackends is a BackendReporter that keeps what it heard.
type recordedBackends struct {
	mu   sync.Mutex
	seen []BackendState
}

func (r *recordedBackends) Backends(_ string, _ endpoints.ServiceRef, seen []BackendState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, seen...)
}

func (r *recordedBackends) failing() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.seen {
		if s.Err != nil {
			out = append(out, s.Server)
		}
	}
	return out
}

// TestDNSCheckAsksTheServiceBackends: a name that fails through the
// cluster DNS Service's address is asked of its endpoints directly. The
// node passes when one endpoint fails while another answers (a broken
// backend elsewhere, reported as degraded), and fails when none answers,
// when the failing nameserver is not the Service's (its own resolver), or
// when every endpoint answers but the Service's address does not (its own
// path to it). The check's time is the runner's test timeout, 1 s.
func TestDNSCheckAsksTheServiceBackends(t *testing.T) {
	const kubeDNS = "kube-dns.kube-system.svc.cluster.local."
	healthy := fakeEndpoint(t, "127.0.0.2", coreDNS(kubeDNS))
	healthyOther := fakeEndpoint(t, "127.0.0.5", coreDNS(kubeDNS))
	notService := fakeEndpoint(t, "127.0.0.6", coreDNS("web.default.svc.cluster.local."))
	broken := fakeEndpoint(t, "127.0.0.3", silent)
	failing := fakeEndpoint(t, "127.0.0.4", servfail)
	cut := fakeEndpoint(t, "127.0.0.7", cutUpstream(kubeDNS))
	cutOther := fakeEndpoint(t, "127.0.0.8", cutUpstream(kubeDNS))
	// The Service's address: each test says what answers there, as
	// kube-proxy sends a query to one backend or another.
	var front atomic.Pointer[dns.HandlerFunc]
	frontAddr := fakeResolverOn(t, "127.0.0.1", func(w dns.ResponseWriter, r *dns.Msg) { (*front.Load())(w, r) })
	// failsOnce fails the first query it gets, then answers as next.
	failsOnce := func(next dns.HandlerFunc) dns.HandlerFunc {
		var n atomic.Int32
		return func(w dns.ResponseWriter, r *dns.Msg) {
			if r.Question[0].Qtype != dns.TypePTR && n.Add(1) == 1 {
				return
			}
			next(w, r)
		}
	}
	tests := []struct {
		name      string
		front     dns.HandlerFunc
		endpoints []dnsServerFor
		// wantErr is in the error; none means the check passes.
		wantErr     string
		wantFailing []string
	}{
		{name: "the query went to a silent backend, the other answers", front: silent, endpoints: []dnsServerFor{healthy, broken}, wantFailing: []string{broken.addr}},
		{name: "the query went to a failing backend, the other answers", front: servfail, endpoints: []dnsServerFor{healthy, failing}, wantFailing: []string{failing.addr}},
		{name: "two of three backends broken", front: silent, endpoints: []dnsServerFor{broken, healthy, failing}, wantFailing: []string{broken.addr, failing.addr}},
		{name: "the query went to a backend with its upstream cut, the other answers", front: silent, endpoints: []dnsServerFor{cut, healthy}, wantFailing: []string{cut.addr}},
		{name: "no backend answers", front: silent, endpoints: []dnsServerFor{cut, cutOther}, wantErr: "no endpoint of kube-system/kube-dns answered directly either"},
		{name: "no backend answers anything", front: silent, endpoints: []dnsServerFor{broken, failing}, wantErr: "i/o timeout"},
		{name: "every backend answers but the Service's address does not", front: silent, endpoints: []dnsServerFor{healthy, healthyOther},
			wantErr: "every endpoint of kube-system/kube-dns asked answers directly, but its address does not answer from this node"},
		{name: "the Service's address fails once", front: failsOnce(coreDNS(kubeDNS)), endpoints: []dnsServerFor{healthy, healthyOther}},
		{name: "the failing nameserver is not the Service's", front: silent, endpoints: []dnsServerFor{notService, broken}, wantErr: "i/o timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			front.Store(&tt.front)
			var eps staticLister
			for _, e := range tt.endpoints {
				eps = append(eps, e.ep)
			}
			rec := &recordedBackends{}
			d := &DNS{
				Names: []string{"kubernetes.default.svc.cluster.local"}, Families: IPFamilies{IPv4}, Server: frontAddr,
				Service: endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}, Endpoints: eps, NodeName: "self",
			}
			ReportBackends([]Check{d}, NewBackendReport(nil, nil, nil, "self", nil, nil))
			d.report = rec
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := d.Run(ctx)
			if ctx.Err() != nil {
				t.Fatalf("Run = %v after the check's timeout: the runner would have told its own timeout instead", err)
			}
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Run = %v, want a pass", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "dns: query kubernetes.default.svc.cluster.local via "+frontAddr)) {
				t.Fatalf("Run = %v, want a dns: error on the query via %s mentioning %q", err, frontAddr, tt.wantErr)
			}
			got := rec.failing()
			slices.Sort(got)
			slices.Sort(tt.wantFailing)
			if !slices.Equal(got, tt.wantFailing) {
				t.Errorf("degraded backends %v, want %v", got, tt.wantFailing)
			}
		})
	}
}

// TestDNSCheckRemembersTheServiceAddress: what a reverse lookup said of a
// nameserver is asked once, not at every failure, and again after its ttl.
func TestDNSCheckRemembersTheServiceAddress(t *testing.T) {
	var ptrs atomic.Int32
	counting := func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Question[0].Qtype == dns.TypePTR {
			ptrs.Add(1)
		}
		coreDNS("kube-dns.kube-system.svc.cluster.local.")(w, r)
	}
	healthy := fakeEndpoint(t, "127.0.0.2", counting)
	broken := fakeEndpoint(t, "127.0.0.3", servfail)
	frontAddr := fakeResolverOn(t, "127.0.0.1", servfail)
	d := &DNS{
		Names: []string{"kubernetes.default.svc.cluster.local"}, Families: IPFamilies{IPv4}, Server: frontAddr,
		Service: endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}, Endpoints: staticLister{healthy.ep, broken.ep}, NodeName: "self",
	}
	fc := clocktesting.NewFakePassiveClock(time.Now())
	d.addrs.clock = fc
	for i, wantPTRs := range []int32{1, 1, 1, 2} {
		if i == 3 {
			fc.SetTime(fc.Now().Add(serviceAddrTTL))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := d.Run(ctx)
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if got := ptrs.Load(); got != wantPTRs {
			t.Errorf("%d reverse lookups after run %d, want %d", got, i, wantPTRs)
		}
	}
}

// TestDNSCheckAsksNoBackendForTheNodesOwnResolver: once a reverse lookup
// said the failing nameserver is not the Service's, later failures through
// it ask no endpoint.
func TestDNSCheckAsksNoBackendForTheNodesOwnResolver(t *testing.T) {
	var asked atomic.Int32
	other := fakeEndpoint(t, "127.0.0.2", func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Question[0].Qtype != dns.TypePTR {
			asked.Add(1)
		}
		coreDNS("web.default.svc.cluster.local.")(w, r)
	})
	frontAddr := fakeResolverOn(t, "127.0.0.1", servfail)
	d := &DNS{
		Names: []string{"kubernetes.default.svc.cluster.local"}, Families: IPFamilies{IPv4}, Server: frontAddr,
		Service: endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}, Endpoints: staticLister{other.ep}, NodeName: "self",
	}
	for i, want := range []int32{1, 1} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := d.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "SERVFAIL") {
			t.Fatalf("run %d: %v, want the node's resolver's SERVFAIL", i, err)
		}
		if got := asked.Load(); got != want {
			t.Errorf("after run %d the endpoint was asked %d times, want %d", i, got, want)
		}
	}
}

// TestDNSCheckNamesAtOnce: the names are resolved at the same time, and
// every failing one is told.
func TestDNSCheckNamesAtOnce(t *testing.T) {
	server := fakeResolver(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if strings.HasPrefix(r.Question[0].Name, "slow") {
			return
		}
		answerA("10.96.0.1")(w, r)
	})
	d := &DNS{Names: []string{"slow-a.example.", "fast.example.", "slow-b.example."}, Families: IPFamilies{IPv4}, Server: server}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := d.Run(ctx)
	if took := time.Since(start); took > 600*time.Millisecond {
		t.Errorf("took %s: the names were asked one after the other", took)
	}
	if err == nil || !strings.Contains(err.Error(), "slow-a.example") || !strings.Contains(err.Error(), "slow-b.example") || strings.Contains(err.Error(), "fast.example") {
		t.Errorf("Run = %v, want both slow names and not the fast one", err)
	}
}

func TestDNSConfigBuildAsksTheBackends(t *testing.T) {
	svc := endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}
	d := NewDNSConfig().Build(Deps{DNSService: svc, Endpoints: &endpoints.EndpointCache{Source: staticLister{}}, NodeName: "n"}).(*DNS)
	if !d.canAskBackends() || d.Service != svc || d.NodeName != "n" {
		t.Errorf("built %+v: does not ask the backends of %s", d, svc)
	}
	if d := NewDNSConfig().Build(Deps{DNSService: svc}).(*DNS); d.canAskBackends() {
		t.Error("without an endpoint cache the check asks backends")
	}
}

// TestReverseLookupOfIPv6Nameservers: the Service's address of an IPv6 or
// dual-stack cluster is asked by its ip6.arpa name (zone dropped), at an
// IPv6 endpoint, and remembered.
func TestReverseLookupOfIPv6Nameservers(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	ep := fakeEndpoint(t, "::1", func(w dns.ResponseWriter, r *dns.Msg) {
		mu.Lock()
		asked = append(asked, r.Question[0].Name)
		mu.Unlock()
		coreDNS("kube-dns.kube-system.svc.cluster.local.")(w, r)
	})
	var c serviceAddrs
	servers := []string{"[fd00:10:96::a]:53", "[fe80::a%eth0]:53"}
	got := c.serviceServers(context.Background(), servers, endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}, []endpoints.Endpoint{ep.ep})
	if !slices.Equal(got, servers) {
		t.Errorf("serviceServers = %v, want %v", got, servers)
	}
	want := []string{
		"a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.",
		"a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.e.f.ip6.arpa.",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, want) {
		t.Errorf("asked %q, want %q", asked, want)
	}
	if isService, known := c.lookup(netip.MustParseAddr("fd00:10:96::a")); !isService || !known {
		t.Errorf("fd00:10:96::a: isService %v, known %v; want both", isService, known)
	}
}

// TestDNSCheckTakesTheAgentsClock: the dns check built from Deps judges the
// age of what it learnt of the Service's addresses on the agent's clock.
func TestDNSCheckTakesTheAgentsClock(t *testing.T) {
	fc := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	d, ok := NewDNSConfig().Build(Deps{Clock: fc}).(*DNS)
	if !ok || d.addrs.clock != fc {
		t.Fatalf("dns check built with clock %v, want the one in Deps", d.addrs.clock)
	}
	addr := netip.MustParseAddr("10.96.0.10")
	d.addrs.remember(addr, true)
	fc.SetTime(fc.Now().Add(serviceAddrTTL - time.Millisecond))
	if isService, known := d.addrs.lookup(addr); !known || !isService {
		t.Errorf("a millisecond before the ttl: known %t, service %t; want both", known, isService)
	}
	fc.SetTime(fc.Now().Add(time.Millisecond))
	if _, known := d.addrs.lookup(addr); known {
		t.Error("at the ttl the address is still known, want it stale")
	}
}
