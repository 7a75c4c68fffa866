package fleet

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// PeerSlicesHint is the annotation the webhook's admission writes on a new
// Node named node (api.PeerSlicesAnnotation): the first of the agents'
// Service's slices in that node's ranking, from their names as its watch
// holds them. The joins that measure the hint create their Nodes with it,
// as the webhook's admission would.
func PeerSlicesHint(ctx context.Context, client kubernetes.Interface, node string) (map[string]string, error) {
	list, err := client.DiscoveryV1().EndpointSlices(harness.AgentNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + harness.AgentPeerService,
	})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return map[string]string{api.PeerSlicesAnnotation: api.FormatPeerSlices(node, names)}, nil
}
