package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"

	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

// Clientset is client-go's generated clientset as the agent builds it, and
// the agent's Server on it; it also serves the checks' reads that are more
// than a typed call (a read of the watch cache, of metadata only, of
// discovery).
type Clientset struct {
	// CS is client-go's typed clientset.
	CS kubernetes.Interface
	// Meta reads objects' metadata only (the peer Service's slice names),
	// over CS's connections; nil for a Clientset built around a given CS
	// (tests), whose reads of metadata then read whole objects.
	Meta metadata.Interface
	// conns tracks the connections to the API server, so that
	// DropStalledConnections can drop the dead ones; nil for a Clientset
	// built around a given CS (tests).
	conns *connTracker
}

// NewClientset builds the agent's client from cfg, on one transport whose
// dead connections DropStalledConnections drops. It speaks protobuf, as the kubelet and
// kube-proxy do: every agent decodes its watch events (the agents' own
// EndpointSlices change on every agent pod's restart, an event to every
// agent) and the API server encodes its reads, both cheaper and smaller than
// in JSON. Every type the agent reads is built in, so none needs JSON.
func NewClientset(cfg *rest.Config) (Clientset, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	dial := cfg.Dial
	if dial == nil {
		// client-go's own dialer, when the configuration names none.
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	conns := newConnTracker(dial)
	cfg.Dial = conns.DialContext
	// One HTTP client for both, so the metadata reads share the typed
	// client's connections (a custom dialer keeps client-go from sharing
	// transports between clients built apart).
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return Clientset{}, err
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return Clientset{}, err
	}
	meta, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return Clientset{}, err
	}
	return Clientset{CS: cs, Meta: meta, conns: conns}, nil
}

// DropStalledConnections drops the connections to the API server whose
// peer stopped acknowledging them, so that the next request dials anew, and
// returns how many. A connection that lost packets during a network
// partition may otherwise carry nothing for tens of seconds after the
// partition heals (TCP's retransmission backoff, then HTTP/2's ping
// timeout); the kubelet drops its connections on repeated heartbeat
// failures for the same reason. Live connections to a slow API server stay.
func (c Clientset) DropStalledConnections() int {
	if c.conns == nil {
		return 0
	}
	return c.conns.DropStalled()
}

var _ Server = Clientset{}

// Client is the agent's access to the API server over c.
func (c Clientset) Client() Client { return Client{Kube: c.CS, Server: c} }

// ServerVersion reads /version; unlike the discovery client's, the request
// ends with ctx.
func (c Clientset) ServerVersion(ctx context.Context) (*version.Info, error) {
	body, err := c.CS.CoreV1().RESTClient().Get().AbsPath("/version").
		SetHeader("Accept", runtime.ContentTypeJSON).Do(ctx).Raw()
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
func (c Clientset) Readyz(ctx context.Context) error {
	return c.CS.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// GetNodeCached reads a Node from the API server's watch cache
// (resourceVersion=0): possibly a little stale, never a read of etcd.
func (c Clientset) GetNodeCached(ctx context.Context, name string) (*corev1.Node, error) {
	return c.CS.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
}

// ListEndpointSlices lists EndpointSlices in namespace.
func (c Clientset) ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return c.CS.DiscoveryV1().EndpointSlices(namespace).List(ctx, opts)
}

// GetServiceCIDR reads a ServiceCIDR, for the checks' IP families, from
// the API server's watch cache (resourceVersion=0): every agent of a fleet
// asks once at start-up, and Service CIDRs rarely change.
func (c Clientset) GetServiceCIDR(ctx context.Context, name string) (*networkingv1.ServiceCIDR, error) {
	return c.CS.NetworkingV1().ServiceCIDRs().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
}

// EventRecorder is the agent's Recorder on client-go's events recorder
// (tools/events), as the webhook records Events.
type EventRecorder struct {
	Recorder events.EventRecorder
}

// Eventf records an Event regarding ref. The note is cut to what the API
// server accepts: an error can be any length, and a refused Event is never
// seen.
func (r EventRecorder) Eventf(ref corev1.ObjectReference, eventType, reason, action, format string, args ...any) {
	r.Recorder.Eventf(&ref, nil, eventType, reason, action, "%s", eventnote.Shorten(fmt.Sprintf(format, args...)))
}

// StartEventRecorder starts client-go's events broadcaster writing to cs, as
// the webhook records Events, and returns the agent's Recorder on it: repeats
// of an Event (same object, type, reason and action) count into its series.
// ctx bounds the writes; stop shuts the broadcaster down.
func StartEventRecorder(ctx context.Context, cs kubernetes.Interface, controller string) (r Recorder, stop func(), err error) {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("start event recording: %w", err)
	}
	return EventRecorder{Recorder: b.NewRecorder(scheme.Scheme, controller)}, b.Shutdown, nil
}

// ResourceSlicesServed reports whether the API server serves
// resource.k8s.io/v1 (GA in Kubernetes 1.34; a cluster may turn it off),
// from its discovery document, which every authenticated client may read;
// unlike the discovery client's, the request ends with ctx.
func (c Clientset) ResourceSlicesServed(ctx context.Context) (bool, error) {
	gv := resourcev1.SchemeGroupVersion
	// Asked for in JSON: the client prefers protobuf (NewClientset), which
	// the API server also speaks for discovery documents.
	body, err := c.CS.Discovery().RESTClient().Get().AbsPath("/apis", gv.String()).
		SetHeader("Accept", runtime.ContentTypeJSON).Do(ctx).Raw()
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	var l metav1.APIResourceList
	if err := json.Unmarshal(body, &l); err != nil {
		return false, fmt.Errorf("decode discovery of %s: %w", gv, err)
	}
	for _, r := range l.APIResources {
		if r.Name == "resourceslices" {
			return true, nil
		}
	}
	return false, nil
}
