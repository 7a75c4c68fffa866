package endpoints

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

type runtimeObject = runtime.Object

// choiceInterval is the fixtures' shortest time between two choices.
const choiceInterval = 5 * time.Minute

var peerSvc = ServiceRef{Namespace: "kube-node-ready", Name: "kube-node-ready"}

// peerSlice is a slice of the agents' Service with one endpoint per node
// name, at 10.<i>.<j>.<k>, ready unless its node is in notReady.
func peerSlice(name string, nodes []string, notReady ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: peerSvc.Namespace, Labels: map[string]string{discoveryv1.LabelServiceName: peerSvc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
	}
	for _, n := range nodes {
		var i int
		_, _ = fmt.Sscanf(n, "n%d", &i)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
			NodeName:   ptr.To(n),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(!slices.Contains(notReady, n))},
		})
	}
	return s
}

// nodeNames are n<from> ... n<to-1>.
func nodeNames(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

// TestChooseSlicesSpreadsNodesEvenly: each node follows one slice when it
// holds enough peers, always the same, and the nodes spread over the slices.
func TestChooseSlicesSpreadsNodesEvenly(t *testing.T) {
	var all []discoveryv1.EndpointSlice
	for i := range 10 {
		all = append(all, *peerSlice(fmt.Sprintf("agents-%d", i), nodeNames(i*100, (i+1)*100)))
	}
	chosen := map[string]int{}
	for _, node := range nodeNames(0, 1000) {
		names := ChooseSlices(node, netip.Addr{}, all, 3)
		if len(names) != 1 {
			t.Fatalf("%s follows %v, want one slice", node, names)
		}
		reversed := slices.Clone(all)
		slices.Reverse(reversed)
		if again := ChooseSlices(node, netip.Addr{}, reversed, 3); !slices.Equal(again, names) {
			t.Fatalf("%s follows %v, or %v when listed in another order", node, names, again)
		}
		chosen[names[0]]++
	}
	for name, n := range chosen {
		if n < 50 || n > 150 {
			t.Errorf("%s followed by %d of 1000 nodes over 10 slices, want about 100", name, n)
		}
	}
	if len(chosen) != 10 {
		t.Errorf("%d slices followed, want 10: %v", len(chosen), chosen)
	}
}

// TestChooseSlicesTakesNextUntilEnough: a slice with too few candidates
// (not ready, on this node, at this pod's address) is followed with the
// next ranked, and all are named when together they cannot hold enough.
func TestChooseSlicesTakesNextUntilEnough(t *testing.T) {
	self := "n1"
	selfIP := netip.MustParseAddr("10.0.0.2")
	all := []discoveryv1.EndpointSlice{
		*peerSlice("a", []string{"n1", "n2", "n3", "n4"}, "n3"), // n1 is self, n2 at selfIP, n3 not ready
		*peerSlice("b", []string{"n5", "n6"}),
		*peerSlice("c", []string{"n7"}),
	}
	for _, tc := range []struct {
		name  string
		need  int
		every bool // every slice chosen
	}{
		{"one candidate is enough for one peer", 1, false},
		{"three peers take slices until three candidates", 3, false},
		{"more peers than candidates take every slice", 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := ChooseSlices(self, selfIP, all, tc.need)
			var chosen []discoveryv1.EndpointSlice
			for _, s := range all {
				if slices.Contains(names, s.Name) {
					chosen = append(chosen, s)
				}
			}
			got := len(SelectPeers(self, selfIP, EndpointsFromSlices(chosen), tc.need))
			if tc.every {
				if len(names) != len(all) {
					t.Fatalf("chose %v, want all three", names)
				}
				return
			}
			if got < tc.need {
				t.Fatalf("chose %v: %d candidates, want %d", names, got, tc.need)
			}
			// The last slice taken was needed: without it, too few.
			without := chosen[:0:0]
			for _, s := range chosen {
				if s.Name != names[len(names)-1] {
					without = append(without, s)
				}
			}
			if len(names) > 1 && len(SelectPeers(self, selfIP, EndpointsFromSlices(without), tc.need)) >= tc.need {
				t.Fatalf("chose %v: enough without %s", names, names[len(names)-1])
			}
		})
	}
}

// fieldSliceClient serves EndpointSlices from a fake clientset, applying
// the metadata.name field selector the fake ignores, and records each
// list's and watch's selectors.
type fieldSliceClient struct {
	fakeSliceClient
	mu    sync.Mutex
	calls []string
	// hold, when set, holds every list of one slice by name until it is
	// closed (a slow API server).
	hold chan struct{}
}

func (c *fieldSliceClient) record(verb string, o metav1.ListOptions) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, verb+" "+o.FieldSelector)
	return strings.TrimPrefix(o.FieldSelector, "metadata.name=")
}

// snapshot is a copy of the calls so far: the informers' goroutines record
// while the test reads.
func (c *fieldSliceClient) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// followedNames are the names of the slices p follows, read under its lock.
func followedNames(p *PeerSlices) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for _, f := range p.followed {
		names = append(names, f.name)
	}
	return names
}

// lists counts the lists of the slices' names: the choices.
func (c *fieldSliceClient) lists() int { return c.count("names ") }

// count counts the calls recorded as call.
func (c *fieldSliceClient) count(call string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, got := range c.calls {
		if got == call {
			n++
		}
	}
	return n
}

func (c *fieldSliceClient) ListEndpointSliceNames(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
	c.record("names", o)
	l, err := c.fakeSliceClient.ListEndpointSlices(ctx, ns, o)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range l.Items {
		names = append(names, s.Name)
	}
	return names, nil
}

func (c *fieldSliceClient) GetServiceFamilies(ctx context.Context, ns, name string) ([]corev1.IPFamily, error) {
	svc, err := c.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return svc.Spec.IPFamilies, nil
}

func (c *fieldSliceClient) ListEndpointSlices(ctx context.Context, ns string, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	name := c.record("list", o)
	c.mu.Lock()
	hold := c.hold
	c.mu.Unlock()
	if hold != nil && name != "" {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l, err := c.fakeSliceClient.ListEndpointSlices(ctx, ns, o)
	if err != nil || name == "" {
		return l, err
	}
	l.Items = slices.DeleteFunc(l.Items, func(s discoveryv1.EndpointSlice) bool { return s.Name != name })
	return l, nil
}

func (c *fieldSliceClient) WatchEndpointSlices(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
	name := c.record("watch", o)
	w, err := c.fakeSliceClient.WatchEndpointSlices(ctx, ns, o)
	if err != nil || name == "" {
		return w, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		s, ok := e.Object.(*discoveryv1.EndpointSlice)
		return e, !ok || s.Name == name
	}), nil
}

// peerSlicesFixture is a PeerSlices for node n0 (3 peers) over slices, on a
// clock the test moves, and its client.
func peerSlicesFixture(t *testing.T, all ...*discoveryv1.EndpointSlice) (*PeerSlices, *fieldSliceClient, *fake.Clientset, *time.Time) {
	t.Helper()
	var objs []runtimeObject
	for _, s := range all {
		objs = append(objs, s)
	}
	cs := fake.NewClientset(objs...)
	client := &fieldSliceClient{fakeSliceClient: fakeSliceClient{cs}}
	p := NewPeerSlices(t.Context(), client, nil, NewSliceWatcher(t.Context(), client, nil))
	now := time.Unix(1_000_000, 0)
	p.now = func() time.Time { return now }
	p.Follow(peerSvc, "n0", netip.Addr{}, 3, choiceInterval)
	return p, client, cs, &now
}

// addrsOf are the endpoints' addresses.
func addrsOf(eps []Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Addr.String())
	}
	return out
}

// TestPeerSlicesFollowsOneSliceByName: with three full slices the peer
// Service's reads hold one slice's endpoints, watched by name, after one
// list; kube-dns is served whole by Others.
func TestPeerSlicesFollowsOneSliceByName(t *testing.T) {
	p, client, cs, _ := peerSlicesFixture(t,
		peerSlice("a", nodeNames(1, 101)), peerSlice("b", nodeNames(101, 201)), peerSlice("c", nodeNames(201, 251)))
	for range 3 {
		eps, err := p.Endpoints(t.Context(), peerSvc)
		if err != nil || len(eps) != 100 && len(eps) != 50 {
			t.Fatalf("read = %d endpoints, %v; want one slice's", len(eps), err)
		}
	}
	if client.lists() != 1 || client.count("list ") != 0 {
		t.Errorf("calls %v: want one list of the slices' names, and no list of every slice", client.snapshot())
	}
	watches := 0
	for _, c := range client.snapshot() {
		if strings.HasPrefix(c, "watch ") {
			watches++
			if !strings.HasPrefix(c, "watch metadata.name=") {
				t.Errorf("watch without a name: %q", c)
			}
		}
	}
	if watches != 1 {
		t.Errorf("calls %v: want one watch", client.snapshot())
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Create(t.Context(), dnsSlice("dns", "10.9.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dns, err := p.Endpoints(t.Context(), ServiceRef{Namespace: "kube-system", Name: "kube-dns"})
	if err != nil || len(dns) != 1 {
		t.Fatalf("kube-dns read = %v, %v", dns, err)
	}
}

// TestPeerSlicesSmallClusterFollowsServiceWhole: one slice is followed by
// the Service's label, so a second slice arrives by the watch.
func TestPeerSlicesSmallClusterFollowsServiceWhole(t *testing.T) {
	p, client, cs, _ := peerSlicesFixture(t, peerSlice("a", nodeNames(1, 11)))
	if eps, err := p.Endpoints(t.Context(), peerSvc); err != nil || len(eps) != 10 {
		t.Fatalf("read = %v, %v", addrsOf(eps), err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(peerSvc.Namespace).Create(t.Context(), peerSlice("b", nodeNames(11, 13)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, p, 12)
	if slices.ContainsFunc(client.snapshot(), func(c string) bool { return strings.Contains(c, "metadata.name") }) {
		t.Errorf("calls %v: a slice followed by name", client.snapshot())
	}
}

// waitEndpoints reads the peer Service until it holds want endpoints.
func waitEndpoints(t *testing.T, p *PeerSlices, want int) []Endpoint {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		eps, err := p.Endpoints(t.Context(), peerSvc)
		if err != nil {
			t.Fatal(err)
		}
		if len(eps) == want {
			return eps
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer reads hold %d endpoints, want %d", len(eps), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPeerSlicesChoosesAgainAtMostOncePerInterval: when the followed slice
// is deleted, reads see it gone but list no more until choiceInterval
// has passed since the last choice; then they follow another slice.
func TestPeerSlicesChoosesAgainAtMostOncePerInterval(t *testing.T) {
	p, client, cs, now := peerSlicesFixture(t,
		peerSlice("a", nodeNames(1, 101)), peerSlice("b", nodeNames(101, 201)), peerSlice("c", nodeNames(201, 301)))
	if _, err := p.Endpoints(t.Context(), peerSvc); err != nil {
		t.Fatal(err)
	}
	first := followedNames(p)[0]
	if err := cs.DiscoveryV1().EndpointSlices(peerSvc.Namespace).Delete(t.Context(), first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deletion arrived (a positive signal), and no list followed it.
	waitEndpoints(t, p, 0)
	*now = now.Add(choiceInterval - time.Second)
	waitEndpoints(t, p, 0)
	if n := client.lists(); n != 1 {
		t.Fatalf("%d choices within the interval, want 1", n)
	}
	*now = now.Add(time.Second)
	waitEndpoints(t, p, 100)
	if n := client.lists(); n != 2 {
		t.Errorf("%d choices, want 2", n)
	}
	if got := followedNames(p)[0]; got == first || len(followedNames(p)) != 1 {
		t.Errorf("follows %s (first %s), want one other slice", got, first)
	}
}

// TestPeerSlicesTooFewAfterChoiceTakesNext: a followed slice whose agents
// went away is followed with the next ranked at the next allowed choice,
// and the watch of the slice kept is not opened again.
func TestPeerSlicesTooFewAfterChoiceTakesNext(t *testing.T) {
	p, client, cs, now := peerSlicesFixture(t,
		peerSlice("a", nodeNames(1, 101)), peerSlice("b", nodeNames(101, 201)), peerSlice("c", nodeNames(201, 301)))
	if _, err := p.Endpoints(t.Context(), peerSvc); err != nil {
		t.Fatal(err)
	}
	first := followedNames(p)[0]
	s, err := cs.DiscoveryV1().EndpointSlices(peerSvc.Namespace).Get(t.Context(), first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoints = s.Endpoints[:2]
	if _, err := cs.DiscoveryV1().EndpointSlices(peerSvc.Namespace).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEndpoints(t, p, 2)
	*now = now.Add(choiceInterval)
	waitEndpoints(t, p, 102)
	if len(followedNames(p)) != 2 || followedNames(p)[0] != first {
		t.Errorf("follows %v, want %s and the next", followedNames(p), first)
	}
	named := 0
	for _, c := range client.snapshot() {
		if c == "watch metadata.name="+first {
			named++
		}
	}
	if named != 1 {
		t.Errorf("calls %v: the kept slice's watch opened %d times, want 1", client.snapshot(), named)
	}
}

// TestPeerSlicesStopThenChoosesAgain: Stop ends the watches, and the next
// read chooses again at once (a fresh start, not a re-choice to limit).
func TestPeerSlicesStopThenChoosesAgain(t *testing.T) {
	p, client, _, _ := peerSlicesFixture(t, peerSlice("a", nodeNames(1, 101)), peerSlice("b", nodeNames(101, 201)))
	if _, err := p.Endpoints(t.Context(), peerSvc); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if eps, err := p.Endpoints(t.Context(), peerSvc); err != nil || len(eps) != 100 {
		t.Fatalf("read after Stop = %d endpoints, %v", len(eps), err)
	}
	if n := client.lists(); n != 2 {
		t.Errorf("%d choices, want 2", n)
	}
}

// failFirstList refuses the first list of the slices' names, the
// choice's; the rest, and every watch, go through.
type failFirstList struct {
	*fieldSliceClient
	failed atomic.Bool
}

func (c *failFirstList) ListEndpointSliceNames(ctx context.Context, ns string, o metav1.ListOptions) ([]string, error) {
	if !c.failed.Swap(true) {
		c.record("names", o)
		return nil, fmt.Errorf("refused")
	}
	return c.fieldSliceClient.ListEndpointSliceNames(ctx, ns, o)
}

// TestPeerSlicesFailedChoiceFollowsServiceWhole: when the slices cannot be
// listed, the Service is followed whole, and the choice is not tried again
// within the interval.
func TestPeerSlicesFailedChoiceFollowsServiceWhole(t *testing.T) {
	p, client, _, _ := peerSlicesFixture(t, peerSlice("a", nodeNames(1, 101)), peerSlice("b", nodeNames(101, 201)))
	p.client = &failFirstList{fieldSliceClient: client}
	for range 3 {
		if eps, err := p.Endpoints(t.Context(), peerSvc); err != nil || len(eps) != 200 {
			t.Fatalf("read = %d endpoints, %v; want the whole Service's", len(eps), err)
		}
	}
	// The refused choice and the whole Service's watch's first list.
	if client.lists() != 1 || client.count("list ") != 1 {
		t.Errorf("calls %v: want one list of names and one of the Service's slices", client.snapshot())
	}
}

// ipv6 is s as its IPv6 twin: the same nodes at fd00::<i>.
func ipv6(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := s.DeepCopy()
	out.Name += "-ipv6"
	out.AddressType = discoveryv1.AddressTypeIPv6
	for i := range out.Endpoints {
		v4 := netip.MustParseAddr(out.Endpoints[i].Addresses[0]).As4()
		out.Endpoints[i].Addresses = []string{netip.AddrFrom16([16]byte{0: 0xfd, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}).String()}
	}
	return out
}

// TestChooseSlicesFollowsEachFamily: a dual-stack Service's slices are
// chosen per address type, so both families keep their peers; a small
// one's two slices are both chosen (followed whole).
func TestChooseSlicesFollowsEachFamily(t *testing.T) {
	small := []discoveryv1.EndpointSlice{*peerSlice("a", nodeNames(1, 11)), *ipv6(peerSlice("a", nodeNames(1, 11)))}
	if got := ChooseSlices("n0", netip.Addr{}, small, 3); len(got) != 2 {
		t.Errorf("small dual-stack Service: chose %v, want both slices", got)
	}
	var large []discoveryv1.EndpointSlice
	for i := range 3 {
		s := peerSlice(fmt.Sprintf("s%d", i), nodeNames(i*100+1, (i+1)*100+1))
		large = append(large, *s, *ipv6(s))
	}
	got := ChooseSlices("n0", netip.Addr{}, large, 3)
	if len(got) != 2 || strings.HasSuffix(got[0], "-ipv6") || !strings.HasSuffix(got[1], "-ipv6") {
		t.Errorf("large dual-stack Service: chose %v, want one IPv4 slice and one IPv6", got)
	}
}

// sliceNames are the names of all.
func sliceNames(all []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range all {
		out = append(out, s.Name)
	}
	return out
}

// readFrom reads the slices of all by name, counting the reads.
func readFrom(all []discoveryv1.EndpointSlice, reads *int) func(string) ([]discoveryv1.EndpointSlice, error) {
	return func(name string) ([]discoveryv1.EndpointSlice, error) {
		*reads++
		for _, s := range all {
			if s.Name == name {
				return []discoveryv1.EndpointSlice{s}, nil
			}
		}
		return nil, nil
	}
}

// TestChooseRankedIsChooseSlices: choosing from the names, reading slices
// in rank order, picks what ChooseSlices picks from every slice, for every
// node, and reads only the slices it chooses; with no Service families
// known, those of the slices read.
func TestChooseRankedIsChooseSlices(t *testing.T) {
	var full, sparse []discoveryv1.EndpointSlice
	for i := range 20 {
		nodes := nodeNames(i*100, (i+1)*100)
		full = append(full, *peerSlice(fmt.Sprintf("agents-%d", i), nodes))
		// Two ready of 100: a node needs two slices, or three.
		sparse = append(sparse, *peerSlice(fmt.Sprintf("agents-%d", i), nodes, nodes[2:]...))
	}
	for _, tc := range []struct {
		name     string
		all      []discoveryv1.EndpointSlice
		families []discoveryv1.AddressType
	}{
		{"full slices, families from the Service", full, []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}},
		{"full slices, families unknown", full, nil},
		{"two ready a slice", sparse, []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, node := range nodeNames(0, 2000) {
				reads := 0
				got, _, err := ChooseRanked(node, netip.Addr{}, sliceNames(tc.all), tc.families, 3, readFrom(tc.all, &reads))
				if err != nil {
					t.Fatal(err)
				}
				want := ChooseSlices(node, netip.Addr{}, tc.all, 3)
				if !slices.Equal(got, want) {
					t.Fatalf("%s chose %v from the names, ChooseSlices %v", node, got, want)
				}
				if reads != len(got) {
					t.Fatalf("%s read %d slices to choose %v", node, reads, got)
				}
			}
		})
	}
}

// TestChooseRankedReadsAFewWhenNoneHasCandidates: when no agent is ready
// yet (a fresh install), a choice reads slicesPerFamily slices, not every
// one, and follows those.
func TestChooseRankedReadsAFewWhenNoneHasCandidates(t *testing.T) {
	var all []discoveryv1.EndpointSlice
	for i := range 100 {
		nodes := nodeNames(i*100, (i+1)*100)
		all = append(all, *peerSlice(fmt.Sprintf("agents-%d", i), nodes, nodes...))
	}
	reads := 0
	got, _, err := ChooseRanked("n0", netip.Addr{}, sliceNames(all), []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}, 3, readFrom(all, &reads))
	if err != nil {
		t.Fatal(err)
	}
	if reads != slicesPerFamily || len(got) != slicesPerFamily {
		t.Errorf("read %d slices and chose %v, want %d of each", reads, got, slicesPerFamily)
	}
	// A family the Service names that has no slice: the walk ends at maxSlicesRead.
	reads = 0
	if _, _, err := ChooseRanked("n0", netip.Addr{}, sliceNames(all), []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6}, 3, readFrom(all, &reads)); err != nil {
		t.Fatal(err)
	}
	if reads != maxSlicesRead {
		t.Errorf("read %d slices for a family with none, want %d", reads, maxSlicesRead)
	}
}

// TestPeerSlicesFollowsEachFamilyOfTheService: with the Service's two
// families readable, a large dual-stack Service is followed by one slice
// of each family, whichever of them ranks first.
func TestPeerSlicesFollowsEachFamilyOfTheService(t *testing.T) {
	var objs []*discoveryv1.EndpointSlice
	for i := range 10 {
		s := peerSlice(fmt.Sprintf("s%d", i), nodeNames(i*100+1, (i+1)*100+1))
		objs = append(objs, s, ipv6(s))
	}
	p, client, cs, _ := peerSlicesFixture(t, objs...)
	createDualStackPeerService(t, cs)
	eps, err := p.Endpoints(t.Context(), peerSvc)
	if err != nil {
		t.Fatal(err)
	}
	wantOneSliceOfEachFamily(t, p, eps)
	if n := client.count("list "); n != 0 {
		t.Errorf("calls %v: a list of every slice", client.snapshot())
	}
}

// createDualStackPeerService creates the peers' Service with both families.
func createDualStackPeerService(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	if _, err := cs.CoreV1().Services(peerSvc.Namespace).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: peerSvc.Name, Namespace: peerSvc.Namespace},
		Spec:       corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// wantOneSliceOfEachFamily: eps are the 100 endpoints of one IPv4 and one
// IPv6 slice.
func wantOneSliceOfEachFamily(t *testing.T, p *PeerSlices, eps []Endpoint) {
	t.Helper()
	fams := byFamily(eps)
	if len(fams[discoveryv1.AddressTypeIPv4]) != 100 || len(fams[discoveryv1.AddressTypeIPv6]) != 100 {
		t.Errorf("follows %v: %d IPv4 and %d IPv6 endpoints, want one slice of each", followedNames(p), len(fams[discoveryv1.AddressTypeIPv4]), len(fams[discoveryv1.AddressTypeIPv6]))
	}
}

// TestPeerSlicesKeepsAChoiceThatHoldsEnough: a choice whose slices hold
// enough candidates is not made again, however long it stands.
func TestPeerSlicesKeepsAChoiceThatHoldsEnough(t *testing.T) {
	p, client, _, now := peerSlicesFixture(t,
		peerSlice("a", nodeNames(1, 101)), peerSlice("b", nodeNames(101, 201)), peerSlice("c", nodeNames(201, 301)))
	for range 5 {
		if eps, err := p.Endpoints(t.Context(), peerSvc); err != nil || len(eps) != 100 {
			t.Fatalf("read = %d endpoints, %v", len(eps), err)
		}
		*now = now.Add(2 * choiceInterval)
	}
	if n := client.lists(); n != 1 {
		t.Errorf("calls %v: %d choices, want 1", client.snapshot(), n)
	}
}

// TestPeerSlicesSlowFirstChoiceFollowsTheSliceByName: when the slice a
// first choice reads does not list within the read (a slow API server),
// the agent follows that slice by name, not the Service whole, and does
// not choose again once it listed.
func TestPeerSlicesSlowFirstChoiceFollowsTheSliceByName(t *testing.T) {
	p, client, cs, _ := peerSlicesFixture(t,
		peerSlice("a", nodeNames(1, 101)), peerSlice("b", nodeNames(101, 201)), peerSlice("c", nodeNames(201, 301)))
	if _, err := cs.CoreV1().Services(peerSvc.Namespace).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: peerSvc.Name, Namespace: peerSvc.Namespace},
		Spec:       corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	client.mu.Lock()
	client.hold = hold
	client.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Endpoints(ctx, peerSvc); err == nil {
		t.Fatal("read while the slice is held answered")
	}
	if names := followedNames(p); len(names) != 1 || names[0] == "" {
		t.Fatalf("follows %q after a slow first choice, want one slice by name", names)
	}
	close(hold)
	waitEndpoints(t, p, 100)
	if client.lists() != 1 || client.count("list ") != 0 {
		t.Errorf("calls %v: want one choice and no list of every slice", client.snapshot())
	}
}
