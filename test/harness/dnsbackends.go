package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// DegradedDNS is a cluster DNS Service of a test's own with two CoreDNS
// endpoints, one of them broken, behind one ClusterIP that sends each
// query to one of them at random, as kube-proxy does: what the agents of a
// cluster see when one CoreDNS replica sits on a node whose upstream is cut.
type DegradedDNS struct {
	// Namespace and Name are the Service's (for --check.discovery.service).
	Namespace, Name string
	// ClusterIP is the Service's address, where the balancer listens.
	ClusterIP string
	// Healthy is the harness's CoreDNS, at DNSPodIP.
	Healthy string
	// Broken is the second CoreDNS's address: it answers in-cluster names
	// and reverse lookups from its kubernetes plugin, and forwards every
	// other name to an upstream that answers nothing, as a replica whose
	// forwarded queries die.
	Broken string
	// BrokenNode is the node the broken endpoint's EndpointSlice names.
	BrokenNode string
	// ResolvConf is a resolver configuration naming ClusterIP, as kubelet
	// writes a pod's.
	ResolvConf string
}

// Service is "namespace/name".
func (d *DegradedDNS) Service() string { return d.Namespace + "/" + d.Name }

// StartDegradedDNS creates kube-system/name (a ClusterIP Service with the
// harness CoreDNS and a broken second CoreDNS as its ready endpoints, the
// broken one on brokenNode) and the balancer at its ClusterIP, all gone
// when the test ends. It waits until the harness CoreDNS answers the
// reverse lookup of the ClusterIP with the Service's name. The control
// plane must run single-stack IPv4 with StartDNS done.
func (cp *ControlPlane) StartDegradedDNS(tb testing.TB, name, brokenNode string) *DegradedDNS {
	tb.Helper()
	ctx := tb.Context()
	if len(cp.Families) != 1 || cp.Primary().Family != corev1.IPv4Protocol {
		tb.Fatal("StartDegradedDNS needs a single-stack IPv4 control plane")
	}
	d := &DegradedDNS{Namespace: "kube-system", Name: name, Healthy: cp.Primary().DNSPodIP, BrokenNode: brokenNode}
	svc, err := cp.Client.CoreV1().Services(d.Namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.Namespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("create Service %s: %v", d.Service(), err)
	}
	tb.Cleanup(func() {
		_ = cp.Client.CoreV1().Services(d.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	d.ClusterIP = svc.Spec.ClusterIP
	if d.Broken, err = cp.NewAddress(); err != nil {
		tb.Fatal(err)
	}

	// The broken replica's upstream reads every query and answers none.
	upstream, err := net.ListenPacket("udp", net.JoinHostPort(cp.loopback(), "0"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { upstream.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			if _, _, err := upstream.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	dir := tb.TempDir()
	corefile := filepath.Join(dir, "Corefile")
	conf := fmt.Sprintf(`.:53 {
    bind %s
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . %s
}
`, d.Broken, cp.Kubeconfig, upstream.LocalAddr())
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	p, err := StartProcess(dir, "coredns-broken", filepath.Join(cp.BinDir, "coredns"), []string{"-conf", corefile}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Stop(5 * time.Second) })

	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-harness", Namespace: d.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "harness.kube-node-ready"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{d.Healthy}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{d.Broken}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To(brokenNode)},
		},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
	if _, err := cp.Client.DiscoveryV1().EndpointSlices(d.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create EndpointSlice of %s: %v", d.Service(), err)
	}
	tb.Cleanup(func() {
		_ = cp.Client.DiscoveryV1().EndpointSlices(d.Namespace).Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
	})

	StartDNSBalancer(tb, net.JoinHostPort(d.ClusterIP, "53"), []string{net.JoinHostPort(d.Healthy, "53"), net.JoinHostPort(d.Broken, "53")})
	d.ResolvConf = filepath.Join(dir, "resolv.conf")
	resolv := fmt.Sprintf("nameserver %s\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", d.ClusterIP)
	if err := os.WriteFile(d.ResolvConf, []byte(resolv), 0o644); err != nil {
		tb.Fatal(err)
	}

	// Both replicas know the Service, and the broken one's upstream is cut.
	reverse, err := dns.ReverseAddr(d.ClusterIP)
	if err != nil {
		tb.Fatal(err)
	}
	want := name + "." + d.Namespace + ".svc.cluster.local."
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	for _, server := range []string{d.Healthy, d.Broken} {
		Eventually(tb, 20*time.Second, "CoreDNS at "+server+" names "+d.ClusterIP+" "+want, func() (bool, string) {
			got, err := lookupPTR(c, net.JoinHostPort(server, "53"), reverse)
			return err == nil && len(got) == 1 && got[0] == want, fmt.Sprintf("%v (err %v)", got, err)
		})
	}
	if _, err := LookupA(c, net.JoinHostPort(d.Broken, "53"), ExternalName); err == nil {
		tb.Fatalf("the broken CoreDNS answers %s: its upstream is not cut", ExternalName)
	}
	return d
}

func lookupPTR(c *dns.Client, server, reverse string) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(reverse, dns.TypePTR)
	r, _, err := c.Exchange(m, server)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", reverse, dns.RcodeToString[r.Rcode])
	}
	var names []string
	for _, rr := range r.Answer {
		if p, ok := rr.(*dns.PTR); ok {
			names = append(names, p.Ptr)
		}
	}
	return names, nil
}

// dnsFlowIdle is how long the balancer keeps a client's flow, as
// conntrack keeps a UDP entry.
const dnsFlowIdle = 30 * time.Second

// StartDNSBalancer forwards UDP datagrams that reach listen to one of
// backends, chosen at random for each new client address and kept for its
// flow, and relays the answers back: kube-proxy's DNAT of a Service's
// ClusterIP, in the harness namespace where no kube-proxy runs. It stops
// when the test ends.
func StartDNSBalancer(tb testing.TB, listen string, backends []string) {
	tb.Helper()
	pc, err := net.ListenPacket("udp", listen)
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	flows := map[string]net.Conn{}
	tb.Cleanup(func() {
		pc.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range flows {
			c.Close()
		}
	})
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, client, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			key := client.String()
			mu.Lock()
			up, ok := flows[key]
			if !ok {
				up, err = net.Dial("udp", backends[rand.IntN(len(backends))])
				if err != nil {
					mu.Unlock()
					continue
				}
				flows[key] = up
				go relayAnswers(pc, client, up, func() {
					mu.Lock()
					delete(flows, key)
					mu.Unlock()
				})
			}
			mu.Unlock()
			_, _ = up.Write(buf[:n])
		}
	}()
}

// relayAnswers writes what up receives to client through pc until up has
// been idle for dnsFlowIdle or is closed, then forgets the flow.
func relayAnswers(pc net.PacketConn, client net.Addr, up net.Conn, forget func()) {
	defer forget()
	defer up.Close()
	buf := make([]byte, 64<<10)
	for {
		_ = up.SetReadDeadline(time.Now().Add(dnsFlowIdle))
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		if _, err := pc.WriteTo(buf[:n], client); err != nil {
			return
		}
	}
}
