package checks

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

func TestParseIPFamilies(t *testing.T) {
	tests := []struct {
		in      string
		want    IPFamilies
		wantErr string
	}{
		{in: "ipv4", want: IPFamilies{IPv4}},
		{in: "ipv6", want: IPFamilies{IPv6}},
		{in: "ipv4,ipv6", want: IPFamilies{IPv4, IPv6}},
		{in: "IPv6, IPv4", want: IPFamilies{IPv6, IPv4}},
		{in: "", wantErr: `unknown IP family ""`},
		{in: "auto", wantErr: `unknown IP family "auto"`},
		{in: "ipv5", wantErr: `unknown IP family "ipv5"`},
		{in: "ipv4,", wantErr: `unknown IP family ""`},
		{in: "ipv6,ipv6", wantErr: "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseIPFamilies(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseIPFamilies(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseIPFamilies(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if again, _ := ParseIPFamilies(got.String()); !reflect.DeepEqual(again, got) {
				t.Errorf("String() %q does not parse back", got.String())
			}
		})
	}
}

func TestFamiliesOfCIDRs(t *testing.T) {
	tests := []struct {
		name  string
		cidrs []string
		want  IPFamilies
	}{
		{name: "ipv4", cidrs: []string{"10.96.0.0/12"}, want: IPFamilies{IPv4}},
		{name: "ipv6", cidrs: []string{"fd00:10:96::/112"}, want: IPFamilies{IPv6}},
		{name: "dual-stack, ipv4 primary", cidrs: []string{"10.96.0.0/12", "fd00:10:96::/112"}, want: IPFamilies{IPv4, IPv6}},
		{name: "dual-stack, ipv6 primary", cidrs: []string{"fd00:10:96::/112", "10.96.0.0/12"}, want: IPFamilies{IPv6, IPv4}},
		{name: "a family twice", cidrs: []string{"fd00:10:96::/112", "10.96.0.0/12", "fd00:10:97::/112"}, want: IPFamilies{IPv6, IPv4}},
		{name: "garbage ignored", cidrs: []string{"not-a-cidr", "10.0.0.0/8"}, want: IPFamilies{IPv4}},
		{name: "none", cidrs: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FamiliesOfCIDRs(tt.cidrs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FamiliesOfCIDRs(%q) = %v, want %v", tt.cidrs, got, tt.want)
			}
		})
	}
}

// serviceCIDRs answers GetServiceCIDR from a map, or with err.
type serviceCIDRs struct {
	cidrs map[string][]string
	err   error
}

func (s serviceCIDRs) GetServiceCIDR(_ context.Context, name string) (*networkingv1.ServiceCIDR, error) {
	if s.err != nil {
		return nil, s.err
	}
	cidrs, ok := s.cidrs[name]
	if !ok {
		return nil, errors.New("not found")
	}
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}, nil
}

func TestClusterIPFamilies(t *testing.T) {
	tests := []struct {
		name    string
		src     serviceCIDRs
		want    IPFamilies
		wantErr string
	}{
		{name: "ipv6 single-stack", src: serviceCIDRs{cidrs: map[string][]string{"kubernetes": {"fd00:10:96::/112"}}}, want: IPFamilies{IPv6}},
		{name: "dual-stack", src: serviceCIDRs{cidrs: map[string][]string{"kubernetes": {"10.96.0.0/12", "fd00:10:96::/112"}}}, want: IPFamilies{IPv4, IPv6}},
		{name: "only another ServiceCIDR", src: serviceCIDRs{cidrs: map[string][]string{"extra": {"10.0.0.0/8"}}}, wantErr: "read ServiceCIDR kubernetes: not found"},
		{name: "read error", src: serviceCIDRs{err: errors.New("forbidden")}, wantErr: "forbidden"},
		{name: "no usable CIDR", src: serviceCIDRs{cidrs: map[string][]string{"kubernetes": {"x"}}}, wantErr: "no usable CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ClusterIPFamilies(context.Background(), tt.src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ClusterIPFamilies = %v, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ClusterIPFamilies = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// answerFamilies answers A questions with v4 and AAAA questions with v6;
// an empty address answers NOERROR without records (NODATA), as a server
// does for a name that has records of the other family only.
func answerFamilies(v4, v6 string) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: 5}
		switch {
		case q.Qtype == dns.TypeA && v4 != "":
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.ParseIP(v4)})
		case q.Qtype == dns.TypeAAAA && v6 != "":
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.ParseIP(v6)})
		}
		w.WriteMsg(m)
	}
}

// garbageFor answers questions of type qtype with bytes that are no DNS
// message and the others as next does.
func garbageFor(qtype uint16, next dns.HandlerFunc) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Question[0].Qtype == qtype {
			w.Write([]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3})
			return
		}
		next(w, r)
	}
}

// aForAAAA answers every question with an A record: to an AAAA question,
// that is no answer.
func aForAAAA(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP("10.96.0.1")})
	w.WriteMsg(m)
}

// TestDeadServerLeavesTimeForTheNext: a nameserver that answers nothing
// costs one query timeout for all its families (they are asked at once),
// so the next nameserver gets the time left (before, a dead first server of
// a dual-stack node used the whole check timeout on its two families).
func TestDeadServerLeavesTimeForTheNext(t *testing.T) {
	dead, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	good := fakeResolver(t, answerFamilies("", "fd00::1"))
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	if err := resolveAny(ctx, []string{dead.LocalAddr().String(), good}, "kubernetes.default", IPFamilies{IPv4, IPv6}); err != nil {
		t.Fatalf("resolveAny = %v, want the second nameserver's AAAA answer", err)
	}
}

// dropFamily drops questions of type qtype (no answer: the client times
// out, as behind a path that drops them) and answers the others as next.
func dropFamily(qtype uint16, next dns.HandlerFunc) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Question[0].Qtype == qtype {
			return
		}
		next(w, r)
	}
}

// TestOneFamilyUnansweredAsksTheOther: in a dual-stack cluster, a DNS
// server that drops A questions but answers AAAA passes the dns and
// discovery checks whichever family is primary, well within the check's
// time: a family's timeout no longer keeps the other from being asked
// (before, every node of such a cluster failed both checks).
func TestOneFamilyUnansweredAsksTheOther(t *testing.T) {
	server := fakeResolver(t, dropFamily(dns.TypeA, answerFamilies("10.96.0.1", "fd00::1")))
	ep := endpointOf(t, server)
	for _, fams := range []IPFamilies{{IPv6, IPv4}, {IPv4, IPv6}, nil} {
		t.Run(fams.String(), func(t *testing.T) {
			for _, c := range []Check{
				&DNS{Names: []string{"kubernetes.default.svc.cluster.local"}, Families: fams, Server: server},
				&Discovery{Service: endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}, Endpoints: &endpoints.EndpointCache{Source: staticLister{ep}},
					QueryName: "kubernetes.default.svc.cluster.local", NodeName: "self", Families: fams},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				start := time.Now()
				err := c.Run(ctx)
				cancel()
				if err != nil {
					t.Errorf("%s: Run = %v, want the AAAA answer", c.Name(), err)
				}
				if took := time.Since(start); took > 500*time.Millisecond {
					t.Errorf("%s: took %s: the AAAA question waited for the A question's timeout", c.Name(), took)
				}
			}
		})
	}
}

// endpointOf is a ready endpoint with a UDP port at server (host:port).
func endpointOf(t *testing.T, server string) endpoints.Endpoint {
	t.Helper()
	ap, err := netip.ParseAddrPort(server)
	if err != nil {
		t.Fatal(err)
	}
	return endpoints.Endpoint{Addr: ap.Addr(), Ready: true, UDPPort: int32(ap.Port()), TCPPort: int32(ap.Port())}
}
