package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// ExternalName is a name outside the cluster domain that CoreDNS answers
// (with ExternalIP, and ExternalIP6 when the cluster has IPv6) from its hosts plugin, standing in for an internet name in
// the offline network namespace.
const (
	ExternalName = "external.example.test"
	ExternalIP   = "192.0.2.10"
)

// StartDNS starts CoreDNS with its kubernetes plugin against the API server,
// listening on the DNSPodIP and DNSServiceIP of every family (port 53), and
// makes sure the kube-system/kube-dns Service and its EndpointSlices exist. It waits until
// CoreDNS answers for the kubernetes Service.
func (cp *ControlPlane) StartDNS(ctx context.Context) error {
	cp.mu.Lock()
	running := cp.coredns != nil
	if running {
		exited, _ := cp.coredns.Exited()
		running = !exited
	}
	cp.mu.Unlock()
	if running {
		return fmt.Errorf("coredns already running")
	}
	if err := cp.ensureKubeDNS(ctx); err != nil {
		return err
	}
	corefile := filepath.Join(cp.Dir, "Corefile")
	conf := fmt.Sprintf(`.:53 {
    bind %s
    errors
    hosts {
%s        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
`, strings.Join(cp.dnsBindAddresses(), " "), externalHosts(cp.Families, 8), cp.Kubeconfig)
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		return err
	}
	cp.ResolvConf = filepath.Join(cp.Dir, "resolv.conf")
	var resolv strings.Builder
	for _, a := range cp.Families {
		fmt.Fprintf(&resolv, "nameserver %s\n", a.DNSServiceIP)
	}
	resolv.WriteString("search default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n")
	if err := os.WriteFile(cp.ResolvConf, []byte(resolv.String()), 0o644); err != nil {
		return err
	}
	cp.DNSAddr = net.JoinHostPort(cp.Primary().DNSPodIP, "53")

	p, err := StartProcess(cp.Dir, "coredns", filepath.Join(cp.BinDir, "coredns"), []string{"-conf", corefile}, nil)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.coredns = p
	cp.mu.Unlock()

	svc, err := cp.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return err
	}
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	err = waitFor(ctx, p, startBudget, func() (bool, error) {
		ips, err := Lookup(c, cp.DNSAddr, "kubernetes.default.svc.cluster.local.", cp.Primary().Family)
		return err == nil && len(ips) == 1 && ips[0] == svc.Spec.ClusterIP, nil
	})
	if err != nil {
		return fmt.Errorf("coredns not answering for kubernetes.default: %w", err)
	}
	return nil
}

// dnsBindAddresses are CoreDNS's pod and Service addresses in every family.
func (cp *ControlPlane) dnsBindAddresses() []string {
	var addrs []string
	for _, a := range cp.Families {
		addrs = append(addrs, a.DNSPodIP, a.DNSServiceIP)
	}
	return addrs
}

// externalHosts are the lines of CoreDNS's hosts plugin that answer
// ExternalName in each family (A and AAAA), indented by indent spaces.
func externalHosts(fams []Addresses, indent int) string {
	var b strings.Builder
	for _, a := range fams {
		fmt.Fprintf(&b, "%s%s %s\n", strings.Repeat(" ", indent), a.ExternalIP, ExternalName)
	}
	return b.String()
}

// StopDNS stops CoreDNS, leaving the kube-dns Service and EndpointSlice as
// they are (as a crashed CoreDNS pod would, until its readiness probe fails).
func (cp *ControlPlane) StopDNS() error {
	cp.mu.Lock()
	p := cp.coredns
	cp.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop(5 * time.Second)
}

func (cp *ControlPlane) ensureKubeDNS(ctx context.Context) error {
	svc := kubeDNSService(cp.Families)
	// Get before Create: a second Create with the fixed ClusterIP fails on the
	// IP allocation before it gets to AlreadyExists.
	if _, err := cp.Client.CoreV1().Services("kube-system").Get(ctx, svc.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = cp.Client.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create kube-dns Service: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("get kube-dns Service: %w", err)
	}
	// No endpointslice controller runs here, so the slices are ours to write
	// (one per family), with the shape the controller would give them.
	for _, a := range cp.Families {
		slice := kubeDNSSlice(a)
		if _, err := cp.Client.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create kube-dns EndpointSlice %s: %w", slice.Name, err)
		}
	}
	return nil
}

// kubeDNSService is the kube-system/kube-dns Service with a ClusterIP in
// each family, primary first.
func kubeDNSService(fams []Addresses) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "kube-dns", Namespace: "kube-system",
			Labels: map[string]string{"k8s-app": "kube-dns"},
		},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	for _, a := range fams {
		svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, a.DNSServiceIP)
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, a.Family)
	}
	svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	if len(fams) > 1 {
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	}
	return svc
}

// kubeDNSSlice is the kube-dns EndpointSlice of one family with CoreDNS's
// address in it; the IPv4 one keeps the name it always had.
func kubeDNSSlice(a Addresses) *discoveryv1.EndpointSlice {
	name := "kube-dns-harness"
	if a.Family == corev1.IPv6Protocol {
		name += "-ipv6"
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "kube-system",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "kube-dns",
				discoveryv1.LabelManagedBy:   "harness.kube-node-ready",
			},
		},
		AddressType: AddressType(a.DNSPodIP),
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{a.DNSPodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "coredns-harness"},
		}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
}

// LookupA sends one A query for name (fully qualified) to server and returns the addresses.
func LookupA(c *dns.Client, server, name string) ([]string, error) {
	return lookup(c, server, name, dns.TypeA)
}

// LookupAAAA sends one AAAA query for name to server and returns the addresses.
func LookupAAAA(c *dns.Client, server, name string) ([]string, error) {
	return lookup(c, server, name, dns.TypeAAAA)
}

// Lookup asks server for name's addresses of family: A for IPv4, AAAA for IPv6.
func Lookup(c *dns.Client, server, name string, family corev1.IPFamily) ([]string, error) {
	if family == corev1.IPv6Protocol {
		return LookupAAAA(c, server, name)
	}
	return LookupA(c, server, name)
}

func lookup(c *dns.Client, server, name string, qtype uint16) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := c.Exchange(m, server)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", name, dns.RcodeToString[r.Rcode])
	}
	var ips []string
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			ips = append(ips, rr.A.String())
		case *dns.AAAA:
			ips = append(ips, rr.AAAA.String())
		}
	}
	return ips, nil
}
