package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// serviceCIDR answers GetServiceCIDR with cidrs or err, counting reads.
type serviceCIDR struct {
	cidrs []string
	err   error
	reads int
}

func (s *serviceCIDR) GetServiceCIDR(context.Context, string) (*networkingv1.ServiceCIDR, error) {
	s.reads++
	if s.err != nil {
		return nil, s.err
	}
	return &networkingv1.ServiceCIDR{Spec: networkingv1.ServiceCIDRSpec{CIDRs: s.cidrs}}, nil
}

// TestResolveIPFamilies: "auto" takes the families of the cluster's
// ServiceCIDR, read once; a read error falls back to both families with one
// log line; an explicit --ip-families is used without a read.
func TestResolveIPFamilies(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		src       *serviceCIDR
		want      checks.IPFamilies
		wantReads int
		wantLog   string
	}{
		{name: "auto on ipv6", src: &serviceCIDR{cidrs: []string{"fd00:10:96::/112"}}, want: checks.IPFamilies{checks.IPv6}, wantReads: 1, wantLog: `ip_families=ipv6`},
		{name: "auto on ipv4", src: &serviceCIDR{cidrs: []string{"10.96.0.0/12"}}, want: checks.IPFamilies{checks.IPv4}, wantReads: 1, wantLog: `ip_families=ipv4`},
		{name: "auto on dual-stack", src: &serviceCIDR{cidrs: []string{"10.96.0.0/12", "fd00:10:96::/112"}}, want: checks.BothFamilies, wantReads: 1, wantLog: `ip_families=ipv4,ipv6`},
		{name: "auto without an answer", src: &serviceCIDR{err: errors.New("the server could not find the requested resource")}, want: checks.BothFamilies, wantReads: 1,
			wantLog: `level=WARN msg="cannot tell the cluster's IP families`},
		// What the chart renders after `helm upgrade --reuse-values` from a
		// release without agent.ipFamilies: auto, not a refused flag.
		{name: "empty is auto", args: []string{"--ip-families="}, src: &serviceCIDR{cidrs: []string{"fd00:10:96::/112"}}, want: checks.IPFamilies{checks.IPv6}, wantReads: 1, wantLog: `ip_families=ipv6`},
		{name: "explicit", args: []string{"--ip-families=ipv6"}, src: &serviceCIDR{cidrs: []string{"10.96.0.0/12"}}, want: checks.IPFamilies{checks.IPv6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := resolved(t, tt.args...)
			var logs bytes.Buffer
			c.ResolveIPFamilies(context.Background(), tt.src, slog.New(slog.NewTextHandler(&logs, nil)))
			if got := c.IPFamilies(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("families = %v, want %v", got, tt.want)
			}
			if tt.src.reads != tt.wantReads {
				t.Errorf("%d reads of the ServiceCIDR, want %d", tt.src.reads, tt.wantReads)
			}
			if n := strings.Count(logs.String(), "\n"); tt.wantLog != "" && (n != 1 || !strings.Contains(logs.String(), tt.wantLog)) {
				t.Errorf("log = %q, want one line with %q", logs.String(), tt.wantLog)
			}
		})
	}
}

// TestUnresolvedAutoAsksForBoth: checks built without ResolveIPFamilies (a
// caller that never read the cluster) ask for both families, never none.
func TestUnresolvedAutoAsksForBoth(t *testing.T) {
	if got := resolved(t).IPFamilies(); !reflect.DeepEqual(got, checks.BothFamilies) {
		t.Errorf("families = %v, want %v", got, checks.BothFamilies)
	}
}
