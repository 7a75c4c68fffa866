package checks

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	networkingv1 "k8s.io/api/networking/v1"
)

// IPFamily is an IP address family a cluster's Services use.
type IPFamily string

// The IP families, spelled as --ip-families and the Kubernetes API spell them.
const (
	IPv4 IPFamily = "ipv4"
	IPv6 IPFamily = "ipv6"
)

// IPFamiliesAuto in --ip-families asks the agent to use the families of the
// cluster's Service CIDRs.
const IPFamiliesAuto = "auto"

// IPFamilies are the address families the dns and discovery checks ask for.
// A name passes when it resolves to an address of any of them: in a
// dual-stack cluster most Services (kubernetes.default among them) are
// single-stack, so requiring both would fail healthy nodes.
type IPFamilies []IPFamily

// BothFamilies asks for A and AAAA records: what the agent uses when it
// cannot tell the cluster's families, as a name of either family then passes.
var BothFamilies = IPFamilies{IPv4, IPv6}

// ParseIPFamilies parses the value of --ip-families other than "auto": a
// comma-separated list of ipv4 and ipv6, each at most once.
func ParseIPFamilies(s string) (IPFamilies, error) {
	var out IPFamilies
	for _, f := range strings.Split(s, ",") {
		fam := IPFamily(strings.ToLower(strings.TrimSpace(f)))
		switch {
		case fam != IPv4 && fam != IPv6:
			return nil, fmt.Errorf("unknown IP family %q, want %s, ipv4, ipv6 or ipv4,ipv6", f, IPFamiliesAuto)
		case slices.Contains(out, fam):
			return nil, fmt.Errorf("IP family %q given twice", f)
		}
		out = append(out, fam)
	}
	return out, nil
}

// String writes the families as --ip-families takes them.
func (fs IPFamilies) String() string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

// qtypes are the DNS record types to ask for, in the families' order (the
// order their errors are told in); no families at all asks for both, so a
// zero value never makes a check that cannot pass.
func (fs IPFamilies) qtypes() []uint16 {
	if len(fs) == 0 {
		fs = BothFamilies
	}
	out := make([]uint16, 0, len(fs))
	for _, f := range fs {
		if f == IPv6 {
			out = append(out, dns.TypeAAAA)
		} else {
			out = append(out, dns.TypeA)
		}
	}
	return out
}

// FamiliesOfCIDRs returns the families of a ServiceCIDR's blocks in the
// order the blocks list them: the cluster's primary family first, as the
// API server lists its --service-cluster-ip-range. Blocks that do not parse
// are ignored.
func FamiliesOfCIDRs(cidrs []string) IPFamilies {
	var out IPFamilies
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			continue
		}
		fam := IPv6
		if p.Addr().Unmap().Is4() {
			fam = IPv4
		}
		if !slices.Contains(out, fam) {
			out = append(out, fam)
		}
	}
	return out
}

// DefaultServiceCIDR is the ServiceCIDR the API server creates from its
// --service-cluster-ip-range: it lists one block per family the cluster's
// Services use.
const DefaultServiceCIDR = "kubernetes"

// ServiceCIDRGetter reads a ServiceCIDR (networking.k8s.io/v1).
type ServiceCIDRGetter interface {
	GetServiceCIDR(ctx context.Context, name string) (*networkingv1.ServiceCIDR, error)
}

// ClusterIPFamilies reads the families of the cluster's Service CIDRs from
// the default ServiceCIDR: one GET at start-up. Without an answer (an API
// server before Kubernetes 1.33 serves none, or RBAC forbids it) it returns
// the error; the caller falls back to BothFamilies.
func ClusterIPFamilies(ctx context.Context, c ServiceCIDRGetter) (IPFamilies, error) {
	sc, err := c.GetServiceCIDR(ctx, DefaultServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("read ServiceCIDR %s: %w", DefaultServiceCIDR, err)
	}
	fams := FamiliesOfCIDRs(sc.Spec.CIDRs)
	if len(fams) == 0 {
		return nil, fmt.Errorf("ServiceCIDR %s lists no usable CIDR: %q", DefaultServiceCIDR, sc.Spec.CIDRs)
	}
	return fams, nil
}
