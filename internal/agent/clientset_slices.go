package agent

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// WatchEndpointSlices watches EndpointSlices in namespace: the discovery
// and network checks follow kube-dns's and the agents' own with it.
func (c Clientset) WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.CS.DiscoveryV1().EndpointSlices(namespace).Watch(ctx, opts)
}
