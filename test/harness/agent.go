package harness

import (
	"context"
	"fmt"
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

// maxEndpointsPerSlice is the endpointslice controller's default
// (--max-endpoints-per-slice).
const maxEndpointsPerSlice = 100

// PublishAgentPeers (re)writes the agents' headless Service EndpointSlices
// with one ready endpoint per node, at its primary address (Node.IP), as
// the endpointslice controller does for the chart's Service: a headless
// Service with a selector and no ipFamilyPolicy is single-stack in the
// cluster's primary family, so its slices list each pod at that family's IP
// only, even on a dual-stack cluster. It is also the one address a
// simulated agent listens on (AgentArgs), while a real one listens on all
// of its pod's. Slices per address family, at most maxEndpointsPerSlice
// endpoints each; IPv4 ones named AgentPeerService, AgentPeerService-1,
// ..., IPv6 ones AgentPeerService-ipv6, -ipv6-1, ...
//
// It also creates the Service itself, as the chart does (headless, with a
// selector, no ipFamilyPolicy: single-stack in the primary family), once:
// an agent reads its IP families to choose the slices of its peers.
func (cp *ControlPlane) PublishAgentPeers(ctx context.Context, nodes ...Node) error {
	if err := cp.createAgentPeerService(ctx); err != nil {
		return err
	}
	slices := cp.Client.DiscoveryV1().EndpointSlices(AgentNamespace)
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + AgentPeerService + "," + discoveryv1.LabelManagedBy + "=harness.kube-node-ready"}
	if err := slices.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	byType := map[discoveryv1.AddressType][]discoveryv1.Endpoint{}
	for _, n := range nodes {
		t := AddressType(n.IP)
		byType[t] = append(byType[t], discoveryv1.Endpoint{
			Addresses: []string{n.IP}, NodeName: ptr.To(n.Name),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	if len(byType) == 0 {
		byType[discoveryv1.AddressTypeIPv4] = nil
	}
	for _, t := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		eps, ok := byType[t]
		if !ok {
			continue
		}
		for i := 0; i == 0 || i*maxEndpointsPerSlice < len(eps); i++ {
			s := agentPeerSlice(t, i)
			s.Endpoints = eps[i*maxEndpointsPerSlice : min(len(eps), (i+1)*maxEndpointsPerSlice)]
			if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create EndpointSlice %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

// createAgentPeerService creates the agents' headless Service, as the
// chart's, unless it is there. Its selector matches no pod here: the
// harness writes the slices itself.
func (cp *ControlPlane) createAgentPeerService(ctx context.Context) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: AgentPeerService, Namespace: AgentNamespace},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app.kubernetes.io/name": "kube-node-ready", "app.kubernetes.io/component": "agent"},
			Ports:     []corev1.ServicePort{{Name: "metrics", Port: MetricsPort, Protocol: corev1.ProtocolTCP}},
		},
	}
	if _, err := cp.Client.CoreV1().Services(AgentNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Service %s/%s: %w", AgentNamespace, AgentPeerService, err)
	}
	return nil
}

// agentPeerSlice is the i-th empty slice of the agents' headless Service
// for addresses of type t.
func agentPeerSlice(t discoveryv1.AddressType, i int) *discoveryv1.EndpointSlice {
	name := AgentPeerService
	if t == discoveryv1.AddressTypeIPv6 {
		name += "-ipv6"
	}
	if i > 0 {
		name = fmt.Sprintf("%s-%d", name, i)
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: AgentNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: AgentPeerService, discoveryv1.LabelManagedBy: "harness.kube-node-ready",
		}},
		AddressType: t,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To[int32](MetricsPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}
