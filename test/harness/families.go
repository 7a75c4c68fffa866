package harness

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The harness's addresses in IPv6. They mirror the IPv4 constants of netns.go
// and cluster.go inside unique local ranges, so nothing is routable outside
// the test's namespaces either.
const (
	// ClusterNet6 is the IPv6 range of the simulated cluster, local in the
	// harness namespace as ClusterNet is.
	ClusterNet6 = "fd00:10:213::/48"
	// APIServerIP6 is the API server's IPv6 address.
	APIServerIP6 = "fd00:10:213::1"
	// DNSPodIP6 is CoreDNS's IPv6 address, as the kube-dns pod's.
	DNSPodIP6 = "fd00:10:213::2"
	// ServiceCIDR6 is the IPv6 Service ClusterIP range.
	ServiceCIDR6 = "fd00:10:213:8000::/112"
	// KubernetesServiceIP6 is default/kubernetes's IPv6 ClusterIP (first
	// address of ServiceCIDR6), when IPv6 is the primary family.
	KubernetesServiceIP6 = "fd00:10:213:8000::1"
	// DNSServiceIP6 is kube-system/kube-dns's IPv6 ClusterIP.
	DNSServiceIP6 = "fd00:10:213:8000::a"
	// PodCIDR6 is the real nodes' IPv6 pod range; each node gets a /64.
	PodCIDR6 = "fd00:10:244::/56"
	// ExternalIP6 is ExternalName's IPv6 address (documentation range).
	ExternalIP6 = "2001:db8::10"
	// realNodeNet6 is the range of the real nodes' veth links in IPv6.
	realNodeNet6 = "fd00:10:214:%x::%x"
)

// Addresses are the harness's fixed addresses in one IP family.
type Addresses struct {
	// Family is IPv4 or IPv6.
	Family corev1.IPFamily
	// ClusterNet is routed to the loopback device in the harness namespace.
	ClusterNet string
	// APIServerIP is where the API server is reached.
	APIServerIP string
	// DNSPodIP is CoreDNS's address on a control plane without real nodes.
	DNSPodIP string
	// ServiceCIDR is the family's Service ClusterIP range.
	ServiceCIDR string
	// KubernetesServiceIP is the first address of ServiceCIDR, which
	// default/kubernetes gets when the family is the primary one.
	KubernetesServiceIP string
	// DNSServiceIP is kube-system/kube-dns's ClusterIP in this family.
	DNSServiceIP string
	// PodCIDR is the real nodes' pod range in this family.
	PodCIDR string
	// NodeCIDRMaskSize is the prefix length of each real node's pod range.
	NodeCIDRMaskSize int
	// ExternalIP is what CoreDNS answers for ExternalName in this family.
	ExternalIP string
}

// IPv4 and IPv6 are the harness's addresses in each family.
var (
	IPv4 = Addresses{
		Family: corev1.IPv4Protocol, ClusterNet: ClusterNet, APIServerIP: APIServerIP, DNSPodIP: DNSPodIP,
		ServiceCIDR: ServiceCIDR, KubernetesServiceIP: KubernetesServiceIP, DNSServiceIP: DNSServiceIP,
		PodCIDR: PodCIDR, NodeCIDRMaskSize: 24, ExternalIP: ExternalIP,
	}
	IPv6 = Addresses{
		Family: corev1.IPv6Protocol, ClusterNet: ClusterNet6, APIServerIP: APIServerIP6, DNSPodIP: DNSPodIP6,
		ServiceCIDR: ServiceCIDR6, KubernetesServiceIP: KubernetesServiceIP6, DNSServiceIP: DNSServiceIP6,
		PodCIDR: PodCIDR6, NodeCIDRMaskSize: 64, ExternalIP: ExternalIP6,
	}
)

// familyAddresses checks families (primary first) and returns their
// addresses; none means IPv4 alone, as the harness always ran.
func familyAddresses(families []corev1.IPFamily) ([]Addresses, error) {
	if len(families) == 0 {
		return []Addresses{IPv4}, nil
	}
	if len(families) > 2 || (len(families) == 2 && families[0] == families[1]) {
		return nil, fmt.Errorf("IP families %v: want one family, or IPv4 and IPv6 in either order", families)
	}
	var out []Addresses
	for _, f := range families {
		switch f {
		case corev1.IPv4Protocol:
			out = append(out, IPv4)
		case corev1.IPv6Protocol:
			out = append(out, IPv6)
		default:
			return nil, fmt.Errorf("IP family %q: want IPv4 or IPv6", f)
		}
	}
	return out, nil
}

// Primary is the addresses of the primary IP family.
func (cp *ControlPlane) Primary() Addresses { return cp.Families[0] }

// loopback is the loopback address of the primary family, where etcd listens.
func (cp *ControlPlane) loopback() string {
	if cp.Primary().Family == corev1.IPv6Protocol {
		return "::1"
	}
	return "127.0.0.1"
}

// nodeCIDRMaskArgs are kube-controller-manager's flags for the size of each
// node's pod ranges: the one flag for IPv4 single-stack, as always; a flag
// per family otherwise (it refuses the one flag in dual-stack).
func nodeCIDRMaskArgs(families []Addresses) []string {
	if len(families) == 1 && families[0].Family == corev1.IPv4Protocol {
		return []string{"--node-cidr-mask-size=" + strconv.Itoa(families[0].NodeCIDRMaskSize)}
	}
	var args []string
	for _, a := range families {
		args = append(args, fmt.Sprintf("--node-cidr-mask-size-%s=%d", strings.ToLower(string(a.Family)), a.NodeCIDRMaskSize))
	}
	return args
}

// joinField joins one field of every family's addresses with commas, as the
// components' dual-stack flags take them (primary first).
func joinField(fams []Addresses, field func(Addresses) string) string {
	var parts []string
	for _, a := range fams {
		parts = append(parts, field(a))
	}
	return strings.Join(parts, ",")
}

// hasIPv6 reports whether one of fams is IPv6.
func hasIPv6(fams []Addresses) bool {
	for _, a := range fams {
		if a.Family == corev1.IPv6Protocol {
			return true
		}
	}
	return false
}

// setupIPv6 makes ClusterNet6 local in the harness namespace, as
// setupNamespace does for ClusterNet: IPv6 on, the range routed to the
// loopback device, and binding to any of its addresses allowed (an IPv6
// local route alone, unlike IPv4's, does not let a process bind to an
// address that is not on an interface). All of it is the namespace's own.
func setupIPv6() error {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		return fmt.Errorf("IPv6 is not available in this kernel (booted with ipv6.disable=1?): %w", err)
	}
	for path, value := range map[string]string{
		"/proc/sys/net/ipv6/conf/all/disable_ipv6":     "0",
		"/proc/sys/net/ipv6/conf/lo/disable_ipv6":      "0",
		"/proc/sys/net/ipv6/ip_nonlocal_bind":          "1",
		"/proc/sys/net/ipv6/conf/default/disable_ipv6": "0",
	} {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("enable IPv6 in the harness namespace: %w", err)
		}
	}
	args := []string{"-6", "route", "replace", "local", ClusterNet6, "dev", "lo"}
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(APIServerIP6, "0"))
	if err != nil {
		return fmt.Errorf("network namespace not usable in IPv6: listen on %s: %w", APIServerIP6, err)
	}
	return l.Close()
}

// AddressType is the EndpointSlice address type of ip.
func AddressType(ip string) discoveryv1.AddressType {
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && !a.Is4In6() {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// hostPort is net.JoinHostPort with an int port: brackets around IPv6.
func hostPort(host string, port int) string {
	return net.JoinHostPort(host, fmt.Sprint(port))
}
