package endpoints

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/watchlist"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// peerSliceCapacity is the endpointslice controller's default
// --max-endpoints-per-slice: a Service followed whole that holds more
// endpoints than this is in more than one slice, and may be narrowed.
const peerSliceCapacity = 100

// PeerSlices is an EndpointLister that reads the agents' own headless
// Service (the network check's peers) from only the EndpointSlices this
// node ranks first, and every other Service (kube-dns, which the discovery
// check needs whole and which has few endpoints) from Others.
//
// Following the whole peer Service makes every agent pod's restart a watch
// event to every agent, and keeps every agent's endpoint on every node: at
// 10 000 nodes, 20 000 events per restarted pod and 10 000 endpoints in
// each agent. The endpointslice controller puts at most 100 endpoints in a
// slice; an agent that follows one slice gets the events of about 100 agents
// and holds about 100 endpoints, and as each ranks the slices by rendezvous
// hash of its node name and the slice names, the agents spread evenly over
// the slices.
//
// Choosing reads the names of the Service's slices only (a metadata list
// from the API server's watch cache) and the Service's address families,
// ranks the names, and reads the slices in that order, each with the watch
// that would follow it (by name, a field selector, so the API server sends
// this agent only that slice's events), until those of every family hold
// at least --check.network.peers candidates (what SelectPeers would pick:
// ready, with an address and a TCP port, not on this node); a slice read
// on the way that its family does not need is dropped. So what a join
// reads does not grow with the cluster: the names (a few hundred bytes
// each, one per 100 agents) instead of every agent's endpoint, and about
// one slice per family. When the Service has one slice per family (a small
// cluster), or the slices chosen are all of them, the Service is followed
// whole, by its label, as before: new slices then arrive by the watch.
// At most a few slices per family are read in one choice: when agents
// are not ready yet (a fresh install) no slice holds candidates, and
// reading them all would be a watch per slice; those read are followed,
// and the next choice comes as below.
//
// A first choice needs no list when the node carries the webhook's hint
// (api.PeerSlicesAnnotation, written at the node's creation: the first
// names of the same ranking, Hint): it reads the slices named there as it
// would have read them from the names, so a join reads the same whatever
// the fleet's size. The hint is taken only when the slices it names that
// still exist hold enough candidates of every family; otherwise (stale,
// garbage, absent: a node created while the webhook was down) the names
// are listed as above.
//
// A read serves what the watches hold, with no request. It chooses again
// when the slices followed by name hold too few candidates of a type (one
// was deleted, as the controller merges and recreates slices, or its agents
// went away), or when the whole Service followed holds more endpoints of a
// type than one slice (the cluster grew), but never more often than once per
// --check.network.peer-refresh (5 minutes by default), which already bounds
// how long the peer list is cached: a cluster with fewer agents than
// --check.network.peers, or whose controller keeps reshaping the slices,
// would otherwise list at every round. The network check's re-read when
// too few peers answered (EndpointCache.Refresh) is such a read: the
// watches are live, so it sees the slices' current endpoints, and a forced
// choice would rank the same slices first, at the cost of a list from every
// agent whose peers fail at once.
type PeerSlices struct {
	// Others serves every Service but the peer Service.
	Others *SliceWatcher

	ctx    context.Context
	client PeerSliceClient
	// log receives the peer watches' refusals, once per episode.
	log *slog.Logger
	now func() time.Time
	// hint returns the node's api.PeerSlicesAnnotation; nil: none.
	hint func() string

	mu sync.Mutex
	// peers is what the network check follows (Follow); unset passes
	// every read to Others.
	peers *peerChoice
	// followed are the watches of the chosen slices, in rank order; a
	// single one named "" follows the whole Service.
	followed []*followedSlices
	// families are the address types of the slices followed by name.
	families []discoveryv1.AddressType
	// chosenAt is when the slices were last listed; zero before the first.
	chosenAt time.Time
}

// PeerSliceClient is what PeerSlices reads: the peer Service's address
// families, its slices' names without their endpoints, and the chosen
// slices' watches.
type PeerSliceClient interface {
	SliceWatchClient
	// ListEndpointSliceNames lists EndpointSlices' names only (metadata).
	ListEndpointSliceNames(ctx context.Context, namespace string, opts metav1.ListOptions) ([]string, error)
	// GetServiceFamilies reads a Service's spec.ipFamilies.
	GetServiceFamilies(ctx context.Context, namespace, name string) ([]corev1.IPFamily, error)
}

// peerChoice says which Service is the peer Service and what makes one of
// its endpoints a candidate.
type peerChoice struct {
	svc   ServiceRef
	node  string
	podIP netip.Addr
	need  int
	// every is the shortest time between two choices.
	every time.Duration
}

// followedSlices is one running watch: of one slice by name, or of the whole
// Service when name is empty.
type followedSlices struct {
	name string
	w    *SliceWatcher
}

// NewPeerSlices returns a PeerSlices whose watches run until ctx ends (or
// Stop) and log their refusals on log, and that serves every Service from
// others until Follow names the peer one.
func NewPeerSlices(ctx context.Context, client PeerSliceClient, log *slog.Logger, others *SliceWatcher) *PeerSlices {
	return &PeerSlices{Others: others, ctx: ctx, client: client, log: log, now: time.Now}
}

// Follow makes svc the peer Service, whose candidates are the endpoints
// SelectPeers(node, podIP, ..., need) would pick, its slices chosen at most
// once per every. It is called once, while the checks are built.
func (p *PeerSlices) Follow(svc ServiceRef, node string, podIP netip.Addr, need int, every time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peers = &peerChoice{svc: svc, node: node, podIP: podIP, need: max(need, 1), every: every}
}

// Hint makes a first choice start from the slices the node's
// api.PeerSlicesAnnotation names, which annotation returns (read from the
// node the agent watches anyway: no request), instead of listing the names
// of every slice. It is called once, before the first read.
func (p *PeerSlices) Hint(annotation func() string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hint = annotation
}

// Stop ends every watch, the peer Service's and Others', for as long as no
// check reads (a bootstrap-only agent gone idle): the next read of the peer
// Service chooses again, at once, as a first read does.
func (p *PeerSlices) Stop() {
	p.mu.Lock()
	p.stopFollowed(nil)
	p.followed, p.chosenAt = nil, time.Time{}
	p.mu.Unlock()
	p.Others.Stop()
}

// Endpoints implements EndpointLister.
func (p *PeerSlices) Endpoints(ctx context.Context, svc ServiceRef) ([]Endpoint, error) {
	p.mu.Lock()
	peers := p.peers
	p.mu.Unlock()
	if peers == nil || svc != peers.svc {
		return p.Others.Endpoints(ctx, svc)
	}
	// Only the network check reads the peer Service: holding the lock
	// while a new watch lists costs no other reader.
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.followed != nil {
		eps, err := p.read(ctx)
		if err != nil || !p.rechoose(eps) {
			return eps, err
		}
	}
	p.choose(ctx)
	return p.read(ctx)
}

// rechoose reports whether the followed slices' endpoints call for a new
// choice, and one is allowed now: slices followed by name hold too few
// candidates of an address type chosen, or the Service followed whole holds
// more endpoints of a type than one slice, and enough candidates.
func (p *PeerSlices) rechoose(eps []Endpoint) bool {
	if p.now().Sub(p.chosenAt) < p.peers.every {
		return false
	}
	fams := byFamily(eps)
	if len(p.followed) == 1 && p.followed[0].name == "" {
		for _, f := range fams {
			if len(f) > peerSliceCapacity && p.candidates(f) >= p.peers.need {
				return true
			}
		}
		return false
	}
	for _, t := range p.families {
		if p.candidates(fams[t]) < p.peers.need {
			return true
		}
	}
	return false
}

// candidates counts the peer candidates among eps, up to need.
func (p *PeerSlices) candidates(eps []Endpoint) int {
	return len(SelectPeers(p.peers.node, p.peers.podIP, eps, p.peers.need))
}

// choose reads the peer Service's families and the names of its slices,
// from the node's hint (Hint) on a first choice, else listed, and follows
// the slices ChooseRanked picks, keeping the watches of slices chosen
// again. When the names cannot be read, or a slice cannot be read on a
// choice made again, what is followed stays; with nothing followed yet, a
// first choice follows the slices it began to read (when the Service's
// families are known), or the whole Service, as their watches retry on
// their own, with backoff; the next choice is one interval away either
// way.
func (p *PeerSlices) choose(ctx context.Context) {
	svc := p.peers.svc
	p.chosenAt = p.now()
	// The families are read beside the names: a first choice is part of a
	// round, within its check's timeout.
	famc := make(chan []corev1.IPFamily, 1)
	go func() {
		// Unknown families (a Service this agent may not read: another
		// than the chart's) are those of the slices read.
		f, _ := p.client.GetServiceFamilies(ctx, svc.Namespace, svc.Name)
		famc <- f
	}()
	families := sync.OnceValue(func() []discoveryv1.AddressType {
		var out []discoveryv1.AddressType
		for _, f := range <-famc {
			out = append(out, discoveryv1.AddressType(f))
		}
		return out
	})
	c := &choice{p: p, ctx: ctx, kept: map[string]*followedSlices{}, opened: map[string]*followedSlices{}}
	for _, f := range p.followed {
		c.kept[f.name] = f
	}
	if p.followed == nil && p.hint != nil {
		if names, all := api.ParsePeerSlices(p.hint()); names != nil && c.fromHint(names, all, families()) {
			return
		}
	}
	names, err := p.client.ListEndpointSliceNames(ctx, svc.Namespace, metav1.ListOptions{
		LabelSelector:   discoveryv1.LabelServiceName + "=" + svc.Name,
		ResourceVersion: "0",
	})
	fams := families()
	if err != nil {
		c.stopOpened()
		p.keepOrWhole()
		return
	}
	var chosen []string
	var read []discoveryv1.EndpointSlice
	if len(names) > max(len(fams), 1) {
		var walked []string
		chosen, read, err = ChooseRanked(p.peers.node, p.peers.podIP, names, fams, p.peers.need, c.reader(&walked))
		if err != nil && (p.followed != nil || len(fams) == 0) {
			c.stopOpened()
			p.keepOrWhole()
			return
		}
		if err != nil {
			// A first choice whose slice did not list within the
			// round (a slow API server): its watch lists on its own,
			// and following it, not the Service whole, is what the
			// choice was for. The next choice checks it.
			chosen, read = walked, nil
		}
	}
	c.follow(chosen, read, fams, len(chosen) == len(names))
}

// fromHint makes a first choice from names, the node's hint (all: every
// slice the Service had when it was written), as from listed names, and
// reports whether it did: not when the slices it names that still exist
// hold too few candidates of a family, two it names are gone, or one could
// not be read; choose
// then lists the names, and the watches opened here serve that choice.
func (c *choice) fromHint(names []string, all bool, families []discoveryv1.AddressType) bool {
	p := c.p
	if all && len(names) <= max(len(families), 1) {
		// As listed: one slice per family is followed whole, by the
		// Service's label, so that new slices arrive by the watch.
		c.follow(nil, nil, families, true)
		return true
	}
	var walked []string
	inner, gone := c.reader(&walked), 0
	chosen, read, err := ChooseRanked(p.peers.node, p.peers.podIP, names, families, p.peers.need, func(name string) ([]discoveryv1.EndpointSlice, error) {
		got, err := inner(name)
		if err == nil && len(got) == 0 {
			// Gone: a hint from long ago (the agent restarted on an old
			// node) may name none that exist; two are enough to tell.
			if gone++; gone == staleHint {
				return nil, errStaleHint
			}
		}
		return got, err
	})
	if err != nil {
		return false
	}
	readOf := map[discoveryv1.AddressType]int{}
	for _, s := range read {
		readOf[s.AddressType]++
	}
	// No limit of slices read: enough means enough candidates.
	if !enoughRead(p.peers.node, p.peers.podIP, read, families, p.peers.need, readOf, math.MaxInt) {
		return false
	}
	// Only a hint naming every slice can say the choice is all of them.
	c.follow(chosen, read, families, all && len(chosen) == len(names))
	return true
}

// staleHint is how many slices the hint names that are gone make it
// dropped: its other names are no longer worth a read each.
const staleHint = 2

var errStaleHint = errors.New("the hint names slices that are gone")

// choice is one choice's watches: those followed before it (kept) and
// those it opened to read a slice.
type choice struct {
	p      *PeerSlices
	ctx    context.Context
	kept   map[string]*followedSlices
	opened map[string]*followedSlices
}

// reader returns ChooseRanked's read: what the watch of a slice holds,
// opening it unless it runs already; walked collects the names read.
func (c *choice) reader(walked *[]string) func(name string) ([]discoveryv1.EndpointSlice, error) {
	return func(name string) ([]discoveryv1.EndpointSlice, error) {
		*walked = append(*walked, name)
		f, ok := c.kept[name]
		if !ok {
			if f, ok = c.opened[name]; !ok {
				f = c.p.start(name)
				c.opened[name] = f
			}
		}
		return f.w.Slices(c.ctx, c.p.peers.svc)
	}
}

// stopOpened ends the watches this choice opened.
func (c *choice) stopOpened() {
	for _, f := range c.opened {
		f.w.Stop()
	}
}

// follow makes chosen, of the slices read, what p follows (the whole
// Service when none or every slice is chosen), and ends the watches no
// longer needed. families are the Service's, for a choice that read none.
func (c *choice) follow(chosen []string, read []discoveryv1.EndpointSlice, families []discoveryv1.AddressType, every bool) {
	p := c.p
	p.families = nil
	for _, s := range read {
		if slices.Contains(chosen, s.Name) && !slices.Contains(p.families, s.AddressType) {
			p.families = append(p.families, s.AddressType)
		}
	}
	if read == nil {
		p.families = families
	}
	if len(chosen) == 0 || every {
		chosen, p.families = []string{""}, nil
	}
	old := p.followed
	p.followed = make([]*followedSlices, 0, len(chosen))
	for _, name := range chosen {
		f, ok := c.kept[name]
		if !ok {
			if f, ok = c.opened[name]; !ok {
				f = p.start(name)
			}
		}
		p.followed = append(p.followed, f)
	}
	for _, f := range append(old, slices.Collect(maps.Values(c.opened))...) {
		if !slices.Contains(p.followed, f) {
			f.w.Stop()
		}
	}
}

// keepOrWhole keeps what is followed after a failed choice, or follows
// the whole Service when nothing is.
func (p *PeerSlices) keepOrWhole() {
	if p.followed == nil {
		p.followed = []*followedSlices{p.start("")}
	}
}

// stopFollowed ends the watches not in keep.
func (p *PeerSlices) stopFollowed(keep map[string]*followedSlices) {
	for _, f := range p.followed {
		if keep[f.name] != f {
			f.w.Stop()
		}
	}
}

// start begins following the slice name of the peer Service, or all of
// them when name is empty, with a SliceWatcher of its own, so that it ends
// alone.
func (p *PeerSlices) start(name string) *followedSlices {
	var client SliceWatchClient = p.client
	if name != "" {
		client = namedSliceClient{inner: p.client, field: "metadata.name=" + name}
	}
	return &followedSlices{name: name, w: NewSliceWatcher(p.ctx, client, p.log)}
}

// read returns the endpoints the followed watches hold.
func (p *PeerSlices) read(ctx context.Context) ([]Endpoint, error) {
	var out []Endpoint
	for _, f := range p.followed {
		eps, err := f.w.Endpoints(ctx, p.peers.svc)
		if err != nil {
			return nil, err
		}
		out = append(out, eps...)
	}
	return out, nil
}

// slicesPerFamily bounds how many slices of each address type one choice
// reads beyond those --check.network.peers needs at 100 endpoints a slice.
const slicesPerFamily = 2

// maxSlicesRead bounds the slices one choice reads in all: a family the
// Service names but whose slices are not there (yet) would otherwise have
// it read every slice. A dual-stack Service's families are ranked
// together, so 16 slices hold both but once in 2^15 nodes.
const maxSlicesRead = 16

// ChooseRanked is the choice of the slices to follow from their names: it
// ranks names by rendezvous hash of node and each name, reads the slices in
// that order (read returns what a name's watch holds: the slice, or none
// when it is gone), and stops once the slices read of every address type in
// families (of every type read, when families is empty) hold need peer
// candidates, or it read slicesPerFamily+need/100 slices per type (or
// maxSlicesRead in all). It
// returns ChooseSlices of the slices read, and those: within each type the
// slices read are the first of its ranking, so the choice is the one
// ChooseSlices makes from every slice (TestChooseRankedIsChooseSlices)
// whenever enough candidates were read.
func ChooseRanked(node string, podIP netip.Addr, names []string, families []discoveryv1.AddressType, need int, read func(name string) ([]discoveryv1.EndpointSlice, error)) (chosen []string, slicesRead []discoveryv1.EndpointSlice, err error) {
	ranked := api.RankPeerSlices(node, names)
	limit := slicesPerFamily + need/peerSliceCapacity
	readOf := map[discoveryv1.AddressType]int{}
	for i, name := range ranked {
		if i == maxSlicesRead || enoughRead(node, podIP, slicesRead, families, need, readOf, limit) {
			break
		}
		got, err := read(name)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range got {
			readOf[s.AddressType]++
		}
		slicesRead = append(slicesRead, got...)
	}
	return ChooseSlices(node, podIP, slicesRead, need), slicesRead, nil
}

// enoughRead reports whether the slices read settle the choice: every type
// wanted (families, or those read) has need candidates or limit slices read.
func enoughRead(node string, podIP netip.Addr, read []discoveryv1.EndpointSlice, families []discoveryv1.AddressType, need int, readOf map[discoveryv1.AddressType]int, limit int) bool {
	if len(families) == 0 {
		if len(read) == 0 {
			return false
		}
		families = slices.Collect(maps.Keys(readOf))
	}
	for _, t := range families {
		if readOf[t] >= limit {
			continue
		}
		var ofType []discoveryv1.EndpointSlice
		for _, s := range read {
			if s.AddressType == t {
				ofType = append(ofType, s)
			}
		}
		if len(SelectPeers(node, podIP, EndpointsFromSlices(ofType), need)) < need {
			return false
		}
	}
	return true
}

// ChooseSlices ranks the slices of each address type by rendezvous hash of
// node and their names and returns the names of the first ones that
// together hold need peer candidates (SelectPeers(node, podIP, ..., need)),
// or of all of that type when they cannot: IPv4 ones first, then IPv6. Each
// node picks a stable choice, and across nodes the slices are chosen evenly.
// A dual-stack Service has slices of both types, and the peers of each are
// followed, so that the check keeps dialing both families.
func ChooseSlices(node string, podIP netip.Addr, all []discoveryv1.EndpointSlice, need int) []string {
	var names []string
	for _, t := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		var ranked []discoveryv1.EndpointSlice
		for _, s := range all {
			if s.AddressType == t {
				ranked = append(ranked, s)
			}
		}
		sort.Slice(ranked, func(i, j int) bool {
			si, sj := api.Rendezvous(node, ranked[i].Name), api.Rendezvous(node, ranked[j].Name)
			if si != sj {
				return si > sj
			}
			return ranked[i].Name < ranked[j].Name
		})
		for i := range ranked {
			names = append(names, ranked[i].Name)
			if len(SelectPeers(node, podIP, EndpointsFromSlices(ranked[:i+1]), need)) >= need {
				break
			}
		}
	}
	return names
}

// byFamily groups endpoints with an address by address type.
func byFamily(eps []Endpoint) map[discoveryv1.AddressType][]Endpoint {
	out := map[discoveryv1.AddressType][]Endpoint{}
	for _, ep := range eps {
		switch {
		case ep.Addr.Is4():
			out[discoveryv1.AddressTypeIPv4] = append(out[discoveryv1.AddressTypeIPv4], ep)
		case ep.Addr.Is6():
			out[discoveryv1.AddressTypeIPv6] = append(out[discoveryv1.AddressTypeIPv6], ep)
		}
	}
	return out
}

// namedSliceClient lists and watches only the EndpointSlice a field
// selector names, so the API server sends a watch of it only that slice's
// events.
type namedSliceClient struct {
	inner SliceWatchClient
	field string
}

func (c namedSliceClient) ListEndpointSlices(ctx context.Context, namespace string, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	o.FieldSelector = c.field
	return c.inner.ListEndpointSlices(ctx, namespace, o)
}

func (c namedSliceClient) WatchEndpointSlices(ctx context.Context, namespace string, o metav1.ListOptions) (watch.Interface, error) {
	o.FieldSelector = c.field
	return c.inner.WatchEndpointSlices(ctx, namespace, o)
}

// IsWatchListSemanticsUnSupported passes on whether the inner client can
// stream a first list (client-go's informers ask).
func (c namedSliceClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.inner)
}
