package endpoints

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	waitpkg "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/watches"
)

// syncPoll is how often a first read checks whether its watch has listed.
const syncPoll = 5 * time.Millisecond

// SliceWatchClient lists and watches EndpointSlices.
type SliceWatchClient interface {
	SliceClient
	WatchEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// SliceWatcher is an EndpointLister that follows each Service's
// EndpointSlices with a watch, started at the Service's first read, instead
// of listing them at every read. The discovery check reads kube-dns's every
// round and the network check the agents' own peers: at 10 000 nodes a list
// per round is 10 000 requests a minute, where a watch costs the API server
// an event per change (rare: a DNS or agent pod coming or going) and no
// request at all in the steady state. Only what the checks read of a slice is
// kept. The watches run until ctx ends or Stop.
type SliceWatcher struct {
	ctx    context.Context
	client SliceWatchClient
	// log receives each watch's refusals, once per episode.
	log *slog.Logger

	mu       sync.Mutex
	services map[ServiceRef]*sliceWatch
}

// sliceWatch is one Service's running watch.
type sliceWatch struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	// done is closed once the informer has returned.
	done chan struct{}
}

// NewSliceWatcher returns a SliceWatcher whose watches run until ctx ends
// and log their refusals on log.
func NewSliceWatcher(ctx context.Context, client SliceWatchClient, log *slog.Logger) *SliceWatcher {
	return &SliceWatcher{ctx: ctx, client: client, log: log, services: map[ServiceRef]*sliceWatch{}}
}

// Stop ends every watch and drops its cache, for as long as no check reads:
// a bootstrap-only agent stops them once its node is verified, as each
// costs the API server a watch (and memory) per node. The next read of a
// Service starts its watch again, with a fresh list.
func (w *SliceWatcher) Stop() {
	w.mu.Lock()
	running := w.services
	w.services = map[ServiceRef]*sliceWatch{}
	w.mu.Unlock()
	for _, s := range running {
		s.cancel()
		<-s.done
	}
}

// Endpoints implements EndpointLister: the endpoints the watch of svc holds.
// The first read of a Service starts its watch and waits, within ctx, for
// its first list.
func (w *SliceWatcher) Endpoints(ctx context.Context, svc ServiceRef) ([]Endpoint, error) {
	slices, err := w.Slices(ctx, svc)
	if err != nil {
		return nil, err
	}
	return EndpointsFromSlices(slices), nil
}

// Slices returns the EndpointSlices (trimmed to what EndpointsFromSlices
// reads) the watch of svc holds, as Endpoints waits for them.
func (w *SliceWatcher) Slices(ctx context.Context, svc ServiceRef) ([]discoveryv1.EndpointSlice, error) {
	inf := w.informer(svc)
	// Polled briefly rather than at WaitForCacheSync's 100 ms: the first
	// list takes milliseconds, and the first round decides a new node's
	// time to untaint.
	synced := func(context.Context) (bool, error) { return inf.HasSynced(), nil }
	if err := waitpkg.PollUntilContextCancel(ctx, syncPoll, true, synced); err != nil {
		return nil, fmt.Errorf("watch EndpointSlices of %s: no first list yet: %w", svc, err)
	}
	objs := inf.GetStore().List()
	slices := make([]discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		slices = append(slices, *o.(*discoveryv1.EndpointSlice))
	}
	return slices, nil
}

// informer returns svc's informer, started on first use (or the first
// after Stop).
func (w *SliceWatcher) informer(svc ServiceRef) cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.services[svc]; ok {
		return s.inf
	}
	selector := discoveryv1.LabelServiceName + "=" + svc.Name
	eps := watches.New(w.log, &discoveryv1.EndpointSlice{}, "service", svc.String())
	// A client that says it cannot stream the first list (a fake in tests)
	// gets a plain list.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(eps.ListWatch(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return w.client.ListEndpointSlices(ctx, svc.Namespace, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return w.client.WatchEndpointSlices(ctx, svc.Namespace, o)
		},
	), w.client), &discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	// Errors only mean the informer already started, which it has not.
	_ = eps.Attach(inf, nil)
	_ = inf.SetTransform(trimSlice)
	ctx, cancel := context.WithCancel(w.ctx)
	s := &sliceWatch{inf: inf, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		inf.RunWithContext(ctx)
	}()
	w.services[svc] = s
	return inf
}

// trimSlice keeps of an EndpointSlice what EndpointsFromSlices reads: at
// 10 000 agents' endpoints the rest (managed fields, hints, zones, target
// references) is most of it.
func trimSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil // a tombstone
	}
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, ResourceVersion: s.ResourceVersion},
		AddressType: s.AddressType,
		Ports:       s.Ports,
		Endpoints:   make([]discoveryv1.Endpoint, len(s.Endpoints)),
	}
	for i, e := range s.Endpoints {
		out.Endpoints[i] = discoveryv1.Endpoint{Addresses: e.Addresses, NodeName: e.NodeName, Conditions: discoveryv1.EndpointConditions{Ready: e.Conditions.Ready}}
	}
	return out, nil
}
