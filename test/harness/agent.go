package harness

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	// AgentNamespace holds the agent's ServiceAccount, Lease and headless
	// Service, as the chart installs them.
	AgentNamespace = "kube-node-ready"
	// AgentServiceAccount is the agent's identity, as the chart names it.
	AgentServiceAccount = "kube-node-ready"
	// AgentPeerService is the agent's headless Service.
	AgentPeerService = "kube-node-ready"
)

// AgentArgs are the flags of an agent playing node on the harness: its own
// address, the harness resolver, an external name CoreDNS answers, and the
// kubernetes Service. Periods stay at their defaults; tests add their own.
func (cp *ControlPlane) AgentArgs(node Node, kubeconfig string) []string {
	return []string{
		"--node-name=" + node.Name,
		"--pod-ip=" + node.IP,
		"--pod-namespace=" + AgentNamespace,
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=" + hostPort(node.IP, MetricsPort),
		"--check.dns.resolv-conf=" + cp.ResolvConf,
		"--check.dns.external-names=" + ExternalName,
		"--check.network.kubernetes-service=" + hostPort(cp.Primary().KubernetesServiceIP, 443),
	}
}

// StartAgent runs the agent for node as its DaemonSet pod would run there:
// as AgentServiceAccount with a token bound to a pod on node (what it may do
// is what ApplyChartRBAC granted), with AgentArgs and then args, which may
// override them. It is stopped when the test ends.
func (cp *ControlPlane) StartAgent(tb testing.TB, node Node, args ...string) *Daemon {
	tb.Helper()
	kubeconfig, err := cp.NodeKubeconfig(context.Background(), AgentNamespace, AgentServiceAccount, node)
	if err != nil {
		tb.Fatal(err)
	}
	return cp.startDaemon(tb, "agent-"+node.Name, node.IP, BuiltBinary(tb, AgentBinary), append(cp.AgentArgs(node, kubeconfig), args...))
}

// PublishAgentPeers (re)writes the agents' headless Service EndpointSlices
// with one ready endpoint per node, as the endpointslice controller would:
// one slice per address family the nodes have (the IPv4 one named after the
// Service, the IPv6 one with "-ipv6" added).
func (cp *ControlPlane) PublishAgentPeers(ctx context.Context, nodes ...Node) error {
	slices := cp.Client.DiscoveryV1().EndpointSlices(AgentNamespace)
	for _, name := range []string{AgentPeerService, AgentPeerService + "-ipv6"} {
		if err := slices.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	byType := map[discoveryv1.AddressType]*discoveryv1.EndpointSlice{}
	var order []*discoveryv1.EndpointSlice
	for _, n := range nodes {
		ips := n.IPs
		if len(ips) == 0 {
			ips = []string{n.IP}
		}
		for _, ip := range ips {
			t := AddressType(ip)
			s := byType[t]
			if s == nil {
				s = agentPeerSlice(t)
				byType[t] = s
				order = append(order, s)
			}
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{ip}, NodeName: ptr.To(n.Name),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			})
		}
	}
	if len(order) == 0 {
		order = append(order, agentPeerSlice(discoveryv1.AddressTypeIPv4))
	}
	for _, s := range order {
		if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// agentPeerSlice is an empty slice of the agents' headless Service for
// addresses of type t.
func agentPeerSlice(t discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	name := AgentPeerService
	if t == discoveryv1.AddressTypeIPv6 {
		name += "-ipv6"
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: AgentNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: AgentPeerService, discoveryv1.LabelManagedBy: "harness.kube-node-ready",
		}},
		AddressType: t,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To[int32](MetricsPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}
