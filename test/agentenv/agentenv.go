// Package agentenv sets up what the agent needs on a harness control plane
// (RBAC as the chart grants it, node-bound credentials, the peer Service's
// EndpointSlice) and runs the real agent binary as one simulated node. The
// end-to-end tests, the benchmarks and the demo share it.
package agentenv

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	// Namespace holds the agent's ServiceAccount, Lease and headless Service.
	Namespace = "kube-node-ready"
	// ServiceAccount is the agent's identity.
	ServiceAccount = "kube-node-ready"
	// PeerService is the agent's headless Service.
	PeerService = "kube-node-ready"
	// MetricsPort is where each agent serves /metrics on its node address.
	MetricsPort = 8080
)

// InstallRBAC grants the agent's ServiceAccount what the chart grants it,
// taken from the rendered chart.
func InstallRBAC(ctx context.Context, cp *harness.ControlPlane) error {
	return cp.ApplyChartRBAC(ctx, Namespace)
}

// Kubeconfig writes a kubeconfig for serviceAccount whose token is bound to a
// pod on node, as a DaemonSet pod's projected token is.
func Kubeconfig(ctx context.Context, cp *harness.ControlPlane, serviceAccount string, node harness.Node) (string, error) {
	token, err := cp.NodeToken(ctx, Namespace, serviceAccount, node.Name)
	if err != nil {
		return "", err
	}
	return cp.WriteKubeconfig(serviceAccount+"-"+node.Name, serviceAccount, token)
}

// Args are the flags of an agent playing node on the harness: its own
// address, the harness resolver, an external name CoreDNS answers, and the
// kubernetes Service. Periods stay at their defaults; tests add their own.
func Args(cp *harness.ControlPlane, node harness.Node, kubeconfig string) []string {
	return []string{
		"--node-name=" + node.Name,
		"--pod-ip=" + node.IP,
		"--pod-namespace=" + Namespace,
		"--kubeconfig=" + kubeconfig,
		fmt.Sprintf("--metrics-bind-address=%s:%d", node.IP, MetricsPort),
		"--check.dns.resolv-conf=" + cp.ResolvConf,
		"--check.dns.external-names=" + harness.ExternalName,
		"--check.network.kubernetes-service=" + harness.KubernetesServiceIP + ":443",
	}
}

// Start runs the agent binary for node with args.
func Start(cp *harness.ControlPlane, node harness.Node, args []string) (*harness.Process, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	return harness.StartProcess(cp.Dir, "agent-"+node.Name, Binary(root), args, nil)
}

// Binary is the path of the built agent under the repository root.
func Binary(root string) string { return filepath.Join(root, "bin", "kube-node-ready-agent") }

// PublishPeers (re)writes the agents' headless Service EndpointSlice with one
// ready endpoint per node, as the endpointslice controller would.
func PublishPeers(ctx context.Context, cp *harness.ControlPlane, nodes ...harness.Node) error {
	slices := cp.Client.DiscoveryV1().EndpointSlices(Namespace)
	if err := slices.Delete(ctx, PeerService, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: PeerService, Namespace: Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: PeerService, discoveryv1.LabelManagedBy: "agentenv.kube-node-ready",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To[int32](MetricsPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, n := range nodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{n.IP}, NodeName: ptr.To(n.Name),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	_, err := slices.Create(ctx, s, metav1.CreateOptions{})
	return err
}
