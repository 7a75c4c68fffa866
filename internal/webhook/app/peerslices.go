package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// peerSliceNames follows the names of the agents' peer Service's
// EndpointSlices (--check.network.peer-service in --namespace): a
// metadata-only informer selected by the Service's label, so it holds a
// name and labels per slice (one per 100 agents), never an endpoint.
// Admission names a new node's first ones in its hint (admission.PeerSlices).
type peerSliceNames struct {
	informer cache.SharedIndexInformer
}

// Names implements admission.PeerSliceNames: nil until the informer has
// listed, so admission never waits for it.
func (p *peerSliceNames) Names() []string {
	if !p.informer.HasSynced() {
		return nil
	}
	var names []string
	for _, obj := range p.informer.GetStore().List() {
		if m, ok := obj.(metav1.Object); ok {
			names = append(names, m.GetName())
		}
	}
	slices.Sort(names)
	return names
}

// startPeerSliceNames starts following the peer Service's slice names on
// every replica (each one admits); nil when --check.network.peer-service
// is empty or there is no API access (an admission-only replica in files
// mode): nodes are then admitted without the hint.
func startPeerSliceNames(ctx context.Context, wg *sync.WaitGroup, opts Options, cfg *rest.Config, log *slog.Logger) (*peerSliceNames, error) {
	if cfg == nil || opts.PeerService == "" {
		return nil, nil
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("peer slices: metadata client: %w", err)
	}
	factory := metadatainformer.NewFilteredSharedInformerFactory(mc, opts.ResyncPeriod, opts.Namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = discoveryv1.LabelServiceName + "=" + opts.PeerService
	})
	informer := factory.ForResource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices")).Informer()
	log = log.With("component", "peer-slices")
	var warned atomic.Bool
	if err := informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		// Forbidden (an RBAC without the chart's Role): nodes are admitted
		// without the hint meanwhile. Told once; the retries at debug.
		level := slog.LevelDebug
		if !warned.Swap(true) {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "peer slices' names not followed: new nodes get no hint", "error", err)
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	wg.Go(func() { <-ctx.Done(); factory.Shutdown() })
	return &peerSliceNames{informer: informer}, nil
}
