//go:build e2e

package harness

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { Main(m) }

func TestControlPlane(t *testing.T) {
	start := time.Now()
	cp := StartT(t, Options{})
	t.Logf("control plane with CoreDNS ready in %s", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	node, err := cp.CreateNode(ctx, "node-a", NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("tainted node reads back", func(t *testing.T) {
		got, err := cp.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Taints) != 1 || got.Spec.Taints[0] != StartupTaint {
			t.Errorf("taints = %v, want [%v]", got.Spec.Taints, StartupTaint)
		}
		if len(got.Status.Addresses) == 0 || got.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: node.IP}) {
			t.Errorf("addresses = %v, want InternalIP %s", got.Status.Addresses, node.IP)
		}
	})

	t.Run("coredns resolves the kubernetes service", func(t *testing.T) {
		svc, err := cp.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := &dns.Client{Timeout: time.Second}
		for _, server := range []string{cp.DNSAddr, net.JoinHostPort(DNSServiceIP, "53")} {
			ips, err := LookupA(c, server, "kubernetes.default.svc.cluster.local")
			if err != nil {
				t.Fatalf("lookup via %s: %v", server, err)
			}
			if len(ips) != 1 || ips[0] != svc.Spec.ClusterIP {
				t.Errorf("via %s: kubernetes.default = %v, want [%s]", server, ips, svc.Spec.ClusterIP)
			}
		}
		ips, err := LookupA(c, cp.DNSAddr, ExternalName)
		if err != nil || len(ips) != 1 || ips[0] != ExternalIP {
			t.Errorf("%s = %v, %v; want [%s]", ExternalName, ips, err, ExternalIP)
		}
		if _, err := LookupA(c, cp.DNSAddr, "missing.default.svc.cluster.local"); err == nil || !strings.Contains(err.Error(), "NXDOMAIN") {
			t.Errorf("lookup of a missing service: err = %v, want NXDOMAIN", err)
		}
	})

	t.Run("kubectl get nodes", func(t *testing.T) {
		out, err := cp.Kubectl(ctx, nil, "get", "nodes", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != "node/"+node.Name {
			t.Errorf("kubectl get nodes = %q, want node/%s", out, node.Name)
		}
	})

	t.Run("node-bound token carries the node name", func(t *testing.T) {
		token, err := cp.NodeToken(ctx, "kube-node-ready", "agent", node.Name)
		if err != nil {
			t.Fatal(err)
		}
		client, err := cp.TokenClient(token)
		if err != nil {
			t.Fatal(err)
		}
		review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		info := review.Status.UserInfo
		if info.Username != "system:serviceaccount:kube-node-ready:agent" {
			t.Errorf("username = %q", info.Username)
		}
		if got := info.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != node.Name {
			t.Errorf("node-name extra = %v, want [%s]", got, node.Name)
		}
	})

	t.Run("dns can be stopped and restarted", func(t *testing.T) {
		if err := cp.StopDNS(); err != nil {
			t.Fatal(err)
		}
		c := &dns.Client{Timeout: 300 * time.Millisecond}
		if _, err := LookupA(c, cp.DNSAddr, "kubernetes.default.svc.cluster.local"); err == nil {
			t.Fatal("lookup succeeded with coredns stopped")
		}
		if err := cp.StartDNS(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// familyCases are the clusters other than IPv4 single-stack the family
// tests start.
var familyCases = []struct {
	name     string
	families []corev1.IPFamily
}{
	{"IPv6", []corev1.IPFamily{corev1.IPv6Protocol}},
	{"dual-stack", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}},
}

// TestControlPlaneIPFamilies starts the plane in IPv6 single-stack and in
// dual-stack (either family primary) and checks what agents on it stand on:
// the kubernetes Service in the primary family, served at that address,
// kube-dns with a ClusterIP in every family, CoreDNS answering A and AAAA as
// the families go, and simulated nodes with an address in each family.
func TestControlPlaneIPFamilies(t *testing.T) {
	ipv6First := familyCases[len(familyCases)-1]
	ipv6First.name, ipv6First.families = "dual-stack IPv6 primary", []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	for _, tc := range append(familyCases, ipv6First) {
		t.Run(tc.name, func(t *testing.T) {
			cp := StartT(t, Options{IPFamilies: tc.families})
			checkFamilies(t, cp, tc.families)
		})
	}
}

func checkFamilies(t *testing.T, cp *ControlPlane, families []corev1.IPFamily) {
	ctx := t.Context()
	primary := cp.Primary()
	svc, err := cp.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != primary.KubernetesServiceIP || len(svc.Spec.IPFamilies) != 1 || svc.Spec.IPFamilies[0] != families[0] {
		t.Errorf("kubernetes Service: clusterIP %s families %v, want %s [%s]", svc.Spec.ClusterIP, svc.Spec.IPFamilies, primary.KubernetesServiceIP, families[0])
	}
	if want := "https://" + hostPort(primary.APIServerIP, apiPort); cp.Config.Host != want {
		t.Errorf("API server at %s, want %s", cp.Config.Host, want)
	}
	dnsSvc, err := cp.Client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := joinField(cp.Families, func(a Addresses) string { return a.DNSServiceIP }); strings.Join(dnsSvc.Spec.ClusterIPs, ",") != want {
		t.Errorf("kube-dns clusterIPs %v, want %s", dnsSvc.Spec.ClusterIPs, want)
	}

	c := &dns.Client{Timeout: time.Second}
	for _, a := range cp.Families {
		for _, server := range []string{cp.DNSAddr, hostPort(a.DNSServiceIP, 53), hostPort(a.DNSPodIP, 53)} {
			if ips, err := Lookup(c, server, "kube-dns.kube-system.svc.cluster.local", a.Family); err != nil || len(ips) != 1 || ips[0] != a.DNSServiceIP {
				t.Errorf("%s lookup of kube-dns via %s = %v, %v; want [%s]", a.Family, server, ips, err, a.DNSServiceIP)
			}
		}
		if ips, err := Lookup(c, cp.DNSAddr, ExternalName, a.Family); err != nil || len(ips) != 1 || ips[0] != a.ExternalIP {
			t.Errorf("%s lookup of %s = %v, %v; want [%s]", a.Family, ExternalName, ips, err, a.ExternalIP)
		}
	}
	ips, err := Lookup(c, cp.DNSAddr, "kubernetes.default.svc.cluster.local", primary.Family)
	if err != nil || len(ips) != 1 || ips[0] != primary.KubernetesServiceIP {
		t.Errorf("lookup of kubernetes.default = %v, %v; want [%s]", ips, err, primary.KubernetesServiceIP)
	}
	if primary.Family == corev1.IPv6Protocol {
		if ips, err := LookupA(c, cp.DNSAddr, "kubernetes.default.svc.cluster.local"); err != nil || len(ips) != 0 {
			t.Errorf("A lookup of kubernetes.default in IPv6 single-stack = %v, %v; want no address", ips, err)
		}
	}

	node, err := cp.CreateNode(ctx, "node-a", NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := cp.GetNode(t, node.Name)
	var internal []string
	for _, a := range got.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if len(internal) != len(families) || node.IP != internal[0] {
		t.Errorf("node %s: InternalIPs %v, want one per family %v, primary %s", node.Name, internal, families, node.IP)
	}
	for i, ip := range internal {
		if want := cp.Families[i].Family; (AddressType(ip) == "IPv6") != (want == corev1.IPv6Protocol) {
			t.Errorf("node %s: InternalIP %s is not %s", node.Name, ip, want)
		}
	}
}
