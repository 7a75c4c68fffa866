package endpoints

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// fullSlices are n slices s00, s01, ... of 100 ready agents each.
func fullSlices(n int) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for i := range n {
		out = append(out, peerSlice(fmt.Sprintf("s%02d", i), nodeNames(1+100*i, 101+100*i)))
	}
	return out
}

// unnamedLists counts the lists of EndpointSlices the fake API server
// answered that no field selector narrowed to one slice: the lists of every
// slice (of their names, here).
func unnamedLists(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		l, ok := a.(k8stesting.ListAction)
		if ok && a.GetResource().Resource == "endpointslices" && l.GetListRestrictions().Fields.Empty() {
			n++
		}
	}
	return n
}

// namedLists counts the reads of one slice by name the fake API server
// answered (a watch's first list).
func namedLists(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		l, ok := a.(k8stesting.ListAction)
		if ok && a.GetResource().Resource == "endpointslices" && !l.GetListRestrictions().Fields.Empty() {
			n++
		}
	}
	return n
}

// chosenWithout is what node n0 follows among all when it lists their names.
func chosenWithout(t *testing.T, all []*discoveryv1.EndpointSlice) []string {
	t.Helper()
	p, _, _, _ := peerSlicesFixture(t, all...)
	if _, err := p.Endpoints(t.Context(), peerSvc); err != nil {
		t.Fatal(err)
	}
	return followedNames(p)
}

// TestPeerSlicesHint: a first choice from the node's hint reads no list of
// the slices' names when the slices hinted hold enough candidates, and
// follows what the listed names would have chosen; a hint that is garbage,
// names slices that are gone, or slices with too few candidates, is
// dropped for the list.
func TestPeerSlicesHint(t *testing.T) {
	all := fullSlices(30)
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	good := api.FormatPeerSlices("n0", names)
	want := chosenWithout(t, all)
	ranked := api.RankPeerSlices("n0", names)
	notReady := slices.Clone(all)
	for i, s := range notReady {
		if slices.Contains(ranked[:api.PeerSlicesHintLen], s.Name) {
			var nodes []string
			for _, ep := range s.Endpoints {
				nodes = append(nodes, *ep.NodeName)
			}
			notReady[i] = peerSlice(s.Name, nodes, nodes...)
		}
	}
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		hint   string
		// lists is how many lists of the names the choice made.
		lists  int
		follow []string
		// named, when set, is how many slices were read by name.
		named int
	}{
		{name: "good", slices: all, hint: good, follow: want},
		{name: "first hinted slice gone, the next holds enough", slices: slices.DeleteFunc(slices.Clone(all), func(s *discoveryv1.EndpointSlice) bool { return s.Name == ranked[0] }), hint: good, follow: []string{ranked[1]}},
		{name: "none", slices: all, hint: "", lists: 1, follow: want},
		{name: "every hinted slice gone", slices: all, hint: "gone-1,gone-2,gone-3,gone-4,gone-5,gone-6,gone-7,gone-8", lists: 1, follow: want,
			// Two gone drop the hint; then the one chosen from the list.
			named: 3},
		{name: "garbage", slices: all, hint: "S00,,not a name", lists: 1, follow: want},
		{name: "too many names", slices: all, hint: good + ",s99", lists: 1, follow: want},
		{name: "hinted slices without candidates", slices: notReady, hint: good, lists: 1},
		{name: "every slice, one: the Service whole", slices: all[:1], hint: "s00", follow: []string{""}},
		{name: "every slice, three", slices: all[:3], hint: api.FormatPeerSlices("n0", names[:3]), follow: chosenWithout(t, all[:3])},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, client, cs, _ := peerSlicesFixture(t, tc.slices...)
			p.Hint(func() string { return tc.hint })
			eps, err := p.Endpoints(t.Context(), peerSvc)
			if err != nil || len(eps) == 0 {
				t.Fatalf("read = %d endpoints, %v", len(eps), err)
			}
			if got := client.lists(); got != tc.lists {
				t.Errorf("%d lists of the slices' names, want %d; calls %v", got, tc.lists, client.snapshot())
			}
			whole := 0
			if slices.Equal(tc.follow, []string{""}) {
				whole = 1 // the Service's watch lists it by its label
			}
			if got := unnamedLists(cs); got != tc.lists+whole {
				t.Errorf("the API server answered %d lists of every slice, want %d", got, tc.lists+whole)
			}
			if got := namedLists(cs); tc.named != 0 && got != tc.named {
				t.Errorf("%d reads of a slice by name, want %d", got, tc.named)
			}
			if got := followedNames(p); tc.follow != nil && !slices.Equal(got, tc.follow) {
				t.Errorf("follows %v, want %v", got, tc.follow)
			}
		})
	}
}

// TestPeerSlicesHintOnlyFirstChoice: a choice made again (as when the
// slices followed lost their candidates) lists the names: the hint was the
// ranking at the node's creation.
func TestPeerSlicesHintOnlyFirstChoice(t *testing.T) {
	all := fullSlices(30)
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	p, client, _, _ := peerSlicesFixture(t, all...)
	p.Hint(func() string { return api.FormatPeerSlices("n0", names) })
	if _, err := p.Endpoints(t.Context(), peerSvc); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.choose(t.Context())
	p.mu.Unlock()
	if client.lists() != 1 {
		t.Errorf("calls %v: want the second choice to list the names", client.snapshot())
	}
}

// TestPeerSlicesHintDualStack: a dual-stack Service's hint is taken when
// its names hold slices of both families with candidates (one of each
// followed, no list), and dropped for the list when they hold one family
// only.
func TestPeerSlicesHintDualStack(t *testing.T) {
	var objs []*discoveryv1.EndpointSlice
	var names []string
	for i := range 10 {
		s := peerSlice(fmt.Sprintf("s%d", i), nodeNames(i*100+1, (i+1)*100+1))
		objs = append(objs, s, ipv6(s))
		names = append(names, s.Name, s.Name+"-ipv6")
	}
	ranked := api.RankPeerSlices("n0", names)
	var v4Only []string
	for _, n := range ranked {
		if !strings.HasSuffix(n, "-ipv6") && len(v4Only) < api.PeerSlicesHintLen {
			v4Only = append(v4Only, n)
		}
	}
	for _, tc := range []struct {
		name  string
		hint  string
		lists int
	}{
		{"both families", api.FormatPeerSlices("n0", names), 0},
		{"one family", strings.Join(v4Only, ","), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, client, cs, _ := peerSlicesFixture(t, objs...)
			createDualStackPeerService(t, cs)
			p.Hint(func() string { return tc.hint })
			eps, err := p.Endpoints(t.Context(), peerSvc)
			if err != nil {
				t.Fatal(err)
			}
			wantOneSliceOfEachFamily(t, p, eps)
			if got := client.lists(); got != tc.lists {
				t.Errorf("%d lists of the names, want %d; calls %v", got, tc.lists, client.snapshot())
			}
		})
	}
}
