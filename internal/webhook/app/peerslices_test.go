package app

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
)

// TestPeerSliceNames: no names until the informer listed, then the names
// of the peer Service's slices in its namespace, and none of another's.
func TestPeerSliceNames(t *testing.T) {
	slice := func(ns, name, svc string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		}
	}
	scheme := fake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := fake.NewSimpleMetadataClient(scheme,
		slice("knr", "agents-b", "agents"), slice("knr", "agents-a", "agents"),
		slice("knr", "other-a", "other"), slice("elsewhere", "agents-c", "agents"))
	factory := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, "knr", func(o *metav1.ListOptions) {
		o.LabelSelector = discoveryv1.LabelServiceName + "=agents"
	})
	p := &peerSliceNames{informer: factory.ForResource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices")).Informer()}
	if got := p.Names(); got != nil {
		t.Fatalf("names before the informer listed: %v", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	deadline := time.Now().Add(10 * time.Second)
	for p.Names() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.Names(); !slices.Equal(got, []string{"agents-a", "agents-b"}) {
		t.Errorf("names %v, want agents-a and agents-b", got)
	}
}

// TestPeerSliceNamesOff: without the flag, or without API access, there is
// no informer and admission adds no hint.
func TestPeerSliceNamesOff(t *testing.T) {
	var wg sync.WaitGroup
	for _, opts := range []Options{{PeerService: ""}, {PeerService: "agents"}} {
		p, err := startPeerSliceNames(t.Context(), &wg, opts, nil, slog.New(slog.DiscardHandler))
		if p != nil || err != nil {
			t.Errorf("%+v: %v, %v", opts.PeerService, p, err)
		}
	}
}
