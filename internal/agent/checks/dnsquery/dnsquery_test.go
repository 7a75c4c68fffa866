package dnsquery

import (
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{name: "kubelet style", in: "search default.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n", want: []string{"10.96.0.10:53"}},
		{name: "several and ipv6", in: "nameserver 10.0.0.1\nnameserver fd00::a\n", want: []string{"10.0.0.1:53", "[fd00::a]:53"}},
		{name: "ipv6 only", in: "nameserver fd00:10:96::a\noptions ndots:5\n", want: []string{"[fd00:10:96::a]:53"}},
		{name: "ipv6 link-local with a zone", in: "nameserver fe80::1%eth0\n", want: []string{"[fe80::1%eth0]:53"}},
		{name: "ipv4-mapped ipv6 kept as written", in: "nameserver ::ffff:10.0.0.1\n", want: []string{"[::ffff:10.0.0.1]:53"}},
		{name: "comments and junk skipped", in: "# nameserver 1.1.1.1\nnameserver not-an-ip\nnameserver\n\tnameserver   10.0.0.2  # trailing\n", want: []string{"10.0.0.2:53"}},
		{name: "no nameserver", in: "search example.com\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResolvConf(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func FuzzParseResolvConf(f *testing.F) {
	f.Add("nameserver 10.96.0.10\nsearch a b\noptions ndots:5\n")
	f.Add("nameserver fe80::1%eth0\n")
	f.Add("nameserver\x00 1.2.3.4\n")
	f.Fuzz(func(t *testing.T, in string) {
		servers, err := ParseResolvConf(strings.NewReader(in))
		if err == nil && len(servers) == 0 {
			t.Fatal("no error and no servers")
		}
		for _, s := range servers {
			if _, _, err := net.SplitHostPort(s); err != nil {
				t.Fatalf("server %q is not host:port: %v", s, err)
			}
		}
	})
}

// FuzzAnswer feeds arbitrary bytes to the answer parsing: whatever a broken
// or hostile resolver sends, the check errs, it never panics.
func FuzzAnswer(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
	good := new(dns.Msg)
	good.SetReply(q)
	good.Answer = append(good.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(10, 96, 0, 1)})
	b, _ := good.Pack()
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Add([]byte("garbage"))
	q6 := new(dns.Msg)
	q6.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeAAAA)
	good6 := new(dns.Msg)
	good6.SetReply(q6)
	good6.Answer = append(good6.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q6.Question[0].Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 5}, AAAA: net.ParseIP("fd00::1")})
	b6, _ := good6.Pack()
	f.Add(b6)
	f.Add(b6[:len(b6)-5])
	qp := new(dns.Msg)
	qp.SetQuestion("10.0.96.10.in-addr.arpa.", dns.TypePTR)
	goodPTR := new(dns.Msg)
	goodPTR.SetReply(qp)
	goodPTR.Answer = append(goodPTR.Answer, &dns.PTR{Hdr: dns.RR_Header{Name: qp.Question[0].Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 5}, Ptr: "kube-dns.kube-system.svc.cluster.local."})
	bp, _ := goodPTR.Pack()
	f.Add(bp)
	f.Fuzz(func(t *testing.T, raw []byte) {
		resp := new(dns.Msg)
		if err := resp.Unpack(raw); err != nil {
			return
		}
		resp.Id = qp.Id
		if names, err := AnswerPTRs(qp, resp); err == nil && len(names) == 0 {
			t.Fatal("PTR: no error and no names")
		}
		// Whatever the answer holds, each question type gets only its own
		// family's addresses, and never an empty success.
		for _, q := range []*dns.Msg{q, q6} {
			resp.Id = q.Id
			addrs, err := AnswerAddrs(q, resp)
			if err == nil && len(addrs) == 0 {
				t.Fatal("no error and no addresses")
			}
			for _, a := range addrs {
				if a.Is4() != (q.Question[0].Qtype == dns.TypeA) {
					t.Fatalf("%s question answered with %s", dns.TypeToString[q.Question[0].Qtype], a)
				}
			}
		}
	})
}
