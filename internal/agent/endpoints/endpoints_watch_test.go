package endpoints

import (
	"context"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// fakeSliceClient serves EndpointSlices from a fake clientset.
type fakeSliceClient struct{ cs kubernetes.Interface }

func (c fakeSliceClient) ListEndpointSlices(ctx context.Context, ns string, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return c.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
}

// IsWatchListSemanticsUnSupported says, as client-go's fake clientset does,
// that the first list cannot be streamed.
func (fakeSliceClient) IsWatchListSemanticsUnSupported() bool { return true }

func (c fakeSliceClient) WatchEndpointSlices(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
	return c.cs.DiscoveryV1().EndpointSlices(ns).Watch(ctx, o)
}

func dnsSlice(name, ip string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](53)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
}

// TestSliceWatcherListsOnceAndFollowsChanges: the first read lists, later
// reads cost nothing and see the changes the watch brought.
func TestSliceWatcherListsOnceAndFollowsChanges(t *testing.T) {
	cs := fake.NewClientset(dnsSlice("a", "10.0.0.1"))
	w := NewSliceWatcher(t.Context(), fakeSliceClient{cs}, nil)
	svc := ServiceRef{Namespace: "kube-system", Name: "kube-dns"}
	eps, err := w.Endpoints(t.Context(), svc)
	if err != nil || len(eps) != 1 || eps[0].Addr.String() != "10.0.0.1" || eps[0].UDPPort != 0 || eps[0].TCPPort != 53 {
		t.Fatalf("first read = %+v, %v", eps, err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Create(t.Context(), dnsSlice("b", "10.0.0.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(eps) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the new slice never arrived: %+v", eps)
		}
		time.Sleep(10 * time.Millisecond)
		if eps, err = w.Endpoints(t.Context(), svc); err != nil {
			t.Fatal(err)
		}
	}
	lists := countLists(cs)
	if lists != 1 {
		t.Errorf("%d lists, want 1 (then the watch)", lists)
	}
}

// TestSliceWatcherFirstReadBoundedByContext: without a first list (the API
// server unreachable) a read fails when its context ends.
func TestSliceWatcherFirstReadBoundedByContext(t *testing.T) {
	w := NewSliceWatcher(t.Context(), blockedSlices{}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := w.Endpoints(ctx, ServiceRef{Namespace: "kube-system", Name: "kube-dns"}); err == nil {
		t.Fatal("read without a first list succeeded")
	}
}

// blockedSlices never answers a list.
type blockedSlices struct{}

func (blockedSlices) ListEndpointSlices(ctx context.Context, _ string, _ metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (blockedSlices) IsWatchListSemanticsUnSupported() bool { return true }

func (blockedSlices) WatchEndpointSlices(ctx context.Context, _ string, _ metav1.ListOptions) (watch.Interface, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// endingSlices serves a fakeSliceClient's watches, records the options of
// each, and lets the test end the open one, as the API server does at the
// watch's timeout.
type endingSlices struct {
	fakeSliceClient
	opts chan metav1.ListOptions
	open chan watch.Interface
}

func (c endingSlices) WatchEndpointSlices(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
	w, err := c.fakeSliceClient.WatchEndpointSlices(ctx, ns, o)
	if err == nil {
		c.opts <- o
		c.open <- w
	}
	return w, err
}

// watchingDNS returns a SliceWatcher on endingSlices that has read
// kube-dns's one slice, so its watch is open.
func watchingDNS(t *testing.T) (*fake.Clientset, endingSlices, *SliceWatcher, ServiceRef) {
	t.Helper()
	cs := fake.NewClientset(dnsSlice("a", "10.0.0.1"))
	c := endingSlices{fakeSliceClient{cs}, make(chan metav1.ListOptions, 4), make(chan watch.Interface, 4)}
	w := NewSliceWatcher(t.Context(), c, nil)
	svc := ServiceRef{Namespace: "kube-system", Name: "kube-dns"}
	if _, err := w.Endpoints(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	return cs, c, w, svc
}

// TestSliceWatcherResumesAfterTimeout: the watch asks for the long timeout,
// and when the server ends it the watcher watches again, without a second
// list, and keeps following changes.
func TestSliceWatcherResumesAfterTimeout(t *testing.T) {
	cs, c, w, svc := watchingDNS(t)
	nextWatch := func() watch.Interface {
		t.Helper()
		select {
		case o := <-c.opts:
			if s := o.TimeoutSeconds; s == nil || *s < 1800 || *s > 3600 {
				t.Errorf("watch timeout = %v, want 30–60 min", s)
			}
			return <-c.open
		case <-time.After(5 * time.Second):
			t.Fatal("no watch")
			return nil
		}
	}
	create := func(name, ip string) {
		t.Helper()
		if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Create(t.Context(), dnsSlice(name, ip), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for eps, _ := w.Endpoints(t.Context(), svc); len(eps) != n; eps, _ = w.Endpoints(t.Context(), svc) {
			if time.Now().After(deadline) {
				t.Fatalf("want %d endpoints, have %+v", n, eps)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	first := nextWatch()
	// An event first: the reflector takes a watch ended within a second
	// with none for a broken one and lists again.
	create("b", "10.0.0.2")
	waitFor(2)
	first.Stop() // the server's timeout
	nextWatch()
	create("c", "10.0.0.3")
	waitFor(3)
	lists := countLists(cs)
	if lists != 1 {
		t.Errorf("%d lists, want 1: a renewed watch resumes, it does not list", lists)
	}
}

// TestSliceWatcherStopEndsWatchesUntilNextRead: Stop ends the open watch
// (the server sees it end); the next read starts a new one, with a list,
// that sees what changed meanwhile.
func TestSliceWatcherStopEndsWatchesUntilNextRead(t *testing.T) {
	cs, c, w, svc := watchingDNS(t)
	<-c.opts
	first := <-c.open
	w.Stop()
	select {
	case _, open := <-first.ResultChan():
		if open {
			t.Fatal("an event on the stopped watch")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop left the watch open")
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Create(t.Context(), dnsSlice("b", "10.0.0.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eps, err := w.Endpoints(t.Context(), svc)
	if err != nil || len(eps) != 2 {
		t.Fatalf("read after Stop = %+v, %v; want both slices", eps, err)
	}
	lists := countLists(cs)
	if lists != 2 {
		t.Errorf("%d lists, want 2: the read after Stop lists again", lists)
	}
	w.Stop()
}

// countLists is how many lists the fake clientset served.
func countLists(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "list" {
			n++
		}
	}
	return n
}
