// Package kube is the agent's small Kubernetes client: typed calls for the
// few resources it uses, over REST clients whose scheme holds only those API
// groups. The generated clientset registers every Kubernetes type at start-up
// and doubles the agent's resident memory (≈ 9 MiB of 26; see
// docs/benchmarks.md), on every node of every cluster.
package kube

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, discoveryv1.AddToScheme, coordinationv1.AddToScheme, eventsv1.AddToScheme, appsv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err) // static registration: only a programming error gets here
		}
	}
	// Of the storage and resource groups the agent reads only what its
	// CSI and DRA gates watch: registering those two types, not the groups,
	// keeps the scheme (and the agent's memory) small.
	scheme.AddKnownTypes(storagev1.SchemeGroupVersion, &storagev1.CSINode{}, &storagev1.CSINodeList{})
	metav1.AddToGroupVersion(scheme, storagev1.SchemeGroupVersion)
	scheme.AddKnownTypes(resourcev1.SchemeGroupVersion, &resourcev1.ResourceSlice{}, &resourcev1.ResourceSliceList{})
	metav1.AddToGroupVersion(scheme, resourcev1.SchemeGroupVersion)
}

// Client talks to the API server for the agent.
type Client struct {
	core, discovery, coordination, events, apps, storage, resource *rest.RESTClient
}

// New builds a client from cfg; its REST clients share one rate limiter
// so cfg's QPS and Burst hold for the agent as a whole.
func New(cfg *rest.Config) (*Client, error) {
	base := rest.CopyConfig(cfg)
	if base.RateLimiter == nil {
		qps, burst := base.QPS, base.Burst
		if qps == 0 {
			qps, burst = rest.DefaultQPS, rest.DefaultBurst
		}
		base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	mk := func(gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(base)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		if gv.Group == "" {
			c.APIPath = "/api"
		}
		c.NegotiatedSerializer = codecs.WithoutConversion()
		return rest.RESTClientFor(c)
	}
	var c Client
	var err error
	if c.core, err = mk(corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.discovery, err = mk(discoveryv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.coordination, err = mk(coordinationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.events, err = mk(eventsv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.apps, err = mk(appsv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.storage, err = mk(storagev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.resource, err = mk(resourcev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	return &c, nil
}

// ServerVersion reads /version.
func (c *Client) ServerVersion(ctx context.Context) (*version.Info, error) {
	body, err := c.core.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("decode /version: %w", err)
	}
	return &info, nil
}

// Readyz asks the API server whether it is ready to serve; nil when it
// answers 200 on /readyz.
func (c *Client) Readyz(ctx context.Context) error {
	return c.core.Get().AbsPath("/readyz").Do(ctx).Error()
}

// GetNode reads a Node from the API server (never a cache).
func (c *Client) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	err := c.core.Get().Resource("nodes").Name(name).Do(ctx).Into(&n)
	return &n, err
}

// GetNodeCached reads a Node from the API server's watch cache
// (resourceVersion=0): possibly a little stale, never a read of etcd.
func (c *Client) GetNodeCached(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	err := c.core.Get().Resource("nodes").Name(name).Param("resourceVersion", "0").Do(ctx).Into(&n)
	return &n, err
}

// ListNodes lists Nodes.
func (c *Client) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	var l corev1.NodeList
	err := c.core.Get().Resource("nodes").VersionedParams(&opts, parameterCodec).Do(ctx).Into(&l)
	return &l, err
}

// WatchNodes watches Nodes.
func (c *Client) WatchNodes(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.core.Get().Resource("nodes").VersionedParams(&opts, parameterCodec).Watch(ctx)
}

// PatchNode patches a Node.
func (c *Client) PatchNode(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Node, error) {
	var n corev1.Node
	err := c.core.Patch(pt).Resource("nodes").Name(name).VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(&n)
	return &n, err
}

// PatchNodeStatus patches a Node's status subresource.
func (c *Client) PatchNodeStatus(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Node, error) {
	var n corev1.Node
	err := c.core.Patch(pt).Resource("nodes").Name(name).SubResource("status").VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(&n)
	return &n, err
}

// ListPods lists Pods in every namespace (callers select by field).
func (c *Client) ListPods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	var l corev1.PodList
	err := c.core.Get().Resource("pods").VersionedParams(&opts, parameterCodec).Do(ctx).Into(&l)
	return &l, err
}

// WatchPods watches Pods in every namespace (callers select by field).
func (c *Client) WatchPods(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.core.Get().Resource("pods").VersionedParams(&opts, parameterCodec).Watch(ctx)
}

// ListDaemonSets lists DaemonSets in every namespace.
func (c *Client) ListDaemonSets(ctx context.Context, opts metav1.ListOptions) (*appsv1.DaemonSetList, error) {
	var l appsv1.DaemonSetList
	err := c.apps.Get().Resource("daemonsets").VersionedParams(&opts, parameterCodec).Do(ctx).Into(&l)
	return &l, err
}

// WatchDaemonSets watches DaemonSets in every namespace.
func (c *Client) WatchDaemonSets(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.apps.Get().Resource("daemonsets").VersionedParams(&opts, parameterCodec).Watch(ctx)
}

// ListEndpointSlices lists EndpointSlices in namespace.
func (c *Client) ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	var l discoveryv1.EndpointSliceList
	err := c.discovery.Get().Namespace(namespace).Resource("endpointslices").VersionedParams(&opts, parameterCodec).Do(ctx).Into(&l)
	return &l, err
}

// GetLease reads a Lease.
func (c *Client) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	err := c.coordination.Get().Namespace(namespace).Resource("leases").Name(name).Do(ctx).Into(&l)
	return &l, err
}

// CreateLease creates a Lease.
func (c *Client) CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	var out coordinationv1.Lease
	err := c.coordination.Post().Namespace(lease.Namespace).Resource("leases").Body(lease).Do(ctx).Into(&out)
	return &out, err
}

// UpdateLease replaces a Lease; the resourceVersion it carries is the precondition.
func (c *Client) UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	var out coordinationv1.Lease
	err := c.coordination.Put().Namespace(lease.Namespace).Resource("leases").Name(lease.Name).Body(lease).Do(ctx).Into(&out)
	return &out, err
}

// CreateEvent creates an events.k8s.io/v1 Event.
func (c *Client) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	if ev.Namespace == "" {
		return fmt.Errorf("event %s: no namespace", ev.Reason)
	}
	return c.events.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Error()
}
