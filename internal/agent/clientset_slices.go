package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// ListEndpointSliceNames lists the names of EndpointSlices in namespace, as
// metadata only: a joining agent chooses the slices of its peers to follow
// from their names, without the endpoints of every other agent.
func (c Clientset) ListEndpointSliceNames(ctx context.Context, namespace string, opts metav1.ListOptions) ([]string, error) {
	var names []string
	if c.Meta == nil {
		list, err := c.ListEndpointSlices(ctx, namespace, opts)
		if err != nil {
			return nil, err
		}
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		return names, nil
	}
	list, err := c.Meta.Resource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices")).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names, nil
}

// GetServiceFamilies reads a Service's IP families (spec.ipFamilies) from
// the API server's watch cache (resourceVersion=0): the address types of
// the EndpointSlices the endpointslice controller makes for it.
func (c Clientset) GetServiceFamilies(ctx context.Context, namespace, name string) ([]corev1.IPFamily, error) {
	svc, err := c.CS.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	return svc.Spec.IPFamilies, nil
}

// WatchEndpointSlices watches EndpointSlices in namespace: the discovery
// and network checks follow kube-dns's and the agents' own with it.
func (c Clientset) WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return c.CS.DiscoveryV1().EndpointSlices(namespace).Watch(ctx, opts)
}
