package checks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks/dnsquery"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

// maxDirectEndpoints bounds the cluster DNS endpoints a failed name is asked
// of directly, ranked by rendezvous hash of the node name so the load
// spreads: every replica of a small cluster DNS, a stable sample of a large
// one. It is only spent on a failure through the node's resolver.
const maxDirectEndpoints = 8

// serviceAddrTTL is how long what a reverse lookup said of a nameserver
// (the cluster DNS Service's address, or not) is believed.
const serviceAddrTTL = 10 * time.Minute

// BackendState is one endpoint of a shared Service as a check found it
// when it asked the endpoint directly.
type BackendState struct {
	// Endpoint is the endpoint asked.
	Endpoint endpoints.Endpoint
	// Server is the address asked (host:port).
	Server string
	// Err is nil when the endpoint answered.
	Err error
}

// backendVerdict is what a failure through the node's resolver comes to,
// given what the Service's endpoints answered when asked directly.
type backendVerdict int

const (
	// noBackendAnswers: no endpoint answered either; the node cannot resolve.
	noBackendAnswers backendVerdict = iota
	// everyBackendAnswers: every endpoint asked answered, so no backend
	// explains the failure: the Service's address is asked again, and
	// failing that, it does not work from this node.
	everyBackendAnswers
	// backendsDegraded: some endpoints failed while others answered: a
	// backend elsewhere is broken, which is no fault of this node.
	backendsDegraded
)

// judgeBackends decides what the direct answers of a Service's endpoints
// say about a failure through the Service, and returns the endpoints that
// failed.
func judgeBackends(states []BackendState) (backendVerdict, []BackendState) {
	var failed []BackendState
	for _, s := range states {
		if s.Err != nil {
			failed = append(failed, s)
		}
	}
	switch {
	case len(failed) == len(states):
		return noBackendAnswers, failed
	case len(failed) == 0:
		return everyBackendAnswers, nil
	default:
		return backendsDegraded, failed
	}
}

// askEndpoints asks each endpoint directly for name, all at once, and
// returns what each answered, in the endpoints' order.
func askEndpoints(ctx context.Context, targets []endpoints.Endpoint, name string, families IPFamilies) []BackendState {
	states := make([]BackendState, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		states[i] = BackendState{Endpoint: t, Server: endpointServer(t)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i].Err = lookupFamilies(ctx, states[i].Server, name, families)
		}()
	}
	wg.Wait()
	return states
}

func endpointServer(ep endpoints.Endpoint) string {
	return net.JoinHostPort(ep.Addr.String(), strconv.Itoa(int(ep.UDPPort)))
}

// isServiceName reports whether name, the target of a PTR record, is the
// Service svc's own name, <name>.<namespace>.svc.<cluster domain>: what the
// cluster DNS answers for the Service's ClusterIP. The cluster domain is
// not needed.
func isServiceName(name string, svc endpoints.ServiceRef) bool {
	labels := strings.Split(strings.TrimSuffix(strings.ToLower(name), "."), ".")
	return len(labels) > 3 && labels[0] == strings.ToLower(svc.Name) &&
		labels[1] == strings.ToLower(svc.Namespace) && labels[2] == "svc" && labels[3] != ""
}

// serviceAddrs remembers which nameserver addresses are the cluster DNS
// Service's own (its ClusterIPs), as reverse lookups at its endpoints told.
// Only a failure through such an address can be a backend's fault: a
// resolver of the node's own (a node-local cache, a dead address in its
// resolv.conf) failing is the node's.
type serviceAddrs struct {
	// clock decides when what is known goes stale (serviceAddrTTL); nil
	// is the real clock.
	clock clock.PassiveClock

	mu    sync.Mutex
	known map[netip.Addr]serviceAddr
}

type serviceAddr struct {
	isService bool
	at        time.Time
}

func (c *serviceAddrs) now() time.Time {
	if c.clock != nil {
		return c.clock.Now()
	}
	return time.Now()
}

// lookup returns what is known of addr, if it is fresh.
func (c *serviceAddrs) lookup(addr netip.Addr) (isService, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.known[addr]
	if !ok || c.now().Sub(e.at) >= serviceAddrTTL {
		return false, false
	}
	return e.isService, true
}

// noneIsService reports whether every one of servers is known not to be
// the Service's address, so its endpoints need not be asked.
func (c *serviceAddrs) noneIsService(servers []string) bool {
	for _, s := range servers {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			continue
		}
		if isService, known := c.lookup(ap.Addr().Unmap().WithZone("")); isService || !known {
			return false
		}
	}
	return true
}

func (c *serviceAddrs) remember(addr netip.Addr, isService bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known == nil {
		c.known = map[netip.Addr]serviceAddr{}
	}
	c.known[addr] = serviceAddr{isService: isService, at: c.now()}
}

// serviceServers returns those of servers that are svc's own addresses:
// known ones from memory, the others by a reverse lookup at every target
// at once. One target naming svc is enough; a server no target gave a
// definite answer for (all silent, or failing) is not svc's this time, and
// is asked again next time.
func (c *serviceAddrs) serviceServers(ctx context.Context, servers []string, svc endpoints.ServiceRef, targets []endpoints.Endpoint) []string {
	var out []string
	for _, s := range servers {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			continue
		}
		addr := ap.Addr().Unmap().WithZone("")
		isService, known := c.lookup(addr)
		if !known {
			var definite bool
			isService, definite = reverseIsService(ctx, addr, svc, targets)
			if definite {
				c.remember(addr, isService)
			}
		}
		if isService {
			out = append(out, s)
		}
	}
	return out
}

// reverseIsService asks every target for the PTR records of addr at once.
// It is definite when a target named svc, or when none did and at least
// one answered with a name or said there is none (NXDOMAIN).
func reverseIsService(ctx context.Context, addr netip.Addr, svc endpoints.ServiceRef, targets []endpoints.Endpoint) (isService, definite bool) {
	type result struct {
		names []string
		err   error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, len(targets))
	for _, t := range targets {
		go func() {
			names, err := dnsquery.LookupPTR(ctx, endpointServer(t), addr)
			results <- result{names, err}
		}()
	}
	for range targets {
		r := <-results
		for _, n := range r.names {
			if isServiceName(n, svc) {
				return true, true
			}
		}
		if r.err == nil || isNameError(r.err) {
			definite = true
		}
	}
	return false, definite
}

// isNameError reports whether err is an answer saying the name does not
// exist (NXDOMAIN): a definite no rather than a failure.
func isNameError(err error) bool {
	var rc dnsquery.RcodeError
	return errors.As(err, &rc) && rc.Rcode == dns.RcodeNameError
}

// The shares of a name's time when its failure can be asked of the
// Service's endpoints: the node's resolver has the first half; the direct
// questions end at eight tenths, asking the Service's address again at nine
// tenths, so the check's verdict comes well before the runner's timeout.
const (
	resolverShare = 0.5
	directShare   = 0.8
	retryShare    = 0.9
)

// phases cuts a name's time into the shares above: until(share) is ctx
// ending at that share of the time ctx had when phases was called.
type phases struct {
	start  time.Time
	budget time.Duration
	ok     bool
}

func phasesOf(ctx context.Context) phases {
	dl, ok := ctx.Deadline()
	now := time.Now()
	return phases{start: now, budget: dl.Sub(now), ok: ok}
}

func (p phases) until(ctx context.Context, share float64) (context.Context, context.CancelFunc) {
	if !p.ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, p.start.Add(time.Duration(share*float64(p.budget))))
}

// canAskBackends reports whether a failure can be asked of the Service's
// endpoints directly.
func (d *DNS) canAskBackends() bool {
	return d.Endpoints != nil && d.Service != (endpoints.ServiceRef{})
}

// resolve resolves name through servers, the node's resolver. When that
// fails through an address of the cluster DNS Service, the Service's
// endpoints are asked directly, and the node fails only when no endpoint
// answers, or when every endpoint answers but the Service's address still
// does not (the node's own path to it, such as kube-proxy or a node-local
// cache on that address, is broken).
func (d *DNS) resolve(ctx context.Context, servers []string, name string) nameResult {
	if !d.canAskBackends() {
		return nameResult{err: resolveAny(ctx, servers, name, d.Families)}
	}
	p := phasesOf(ctx)
	first, cancel := p.until(ctx, resolverShare)
	err := resolveAny(first, servers, name, d.Families)
	cancel()
	if err == nil || ctx.Err() != nil {
		return nameResult{err: err}
	}
	return d.askBackends(ctx, p, servers, name, err)
}

// askBackends asks the Service's endpoints for name directly after the
// node's resolver failed with viaService, and tells which of the node's
// servers are the Service's addresses by reverse lookups at the same
// endpoints, all at once.
func (d *DNS) askBackends(ctx context.Context, p phases, servers []string, name string, viaService error) nameResult {
	if d.addrs.noneIsService(servers) {
		return nameResult{err: viaService}
	}
	eps, err := d.Endpoints.Endpoints(ctx, d.Service)
	if err != nil {
		return nameResult{err: viaService}
	}
	// Unlike peers, a DNS pod on this very node is a fine target.
	targets := endpoints.RankEndpoints(d.NodeName, eps, maxDirectEndpoints, udpPort, func(endpoints.Endpoint) bool { return false })
	if len(targets) == 0 {
		return nameResult{err: viaService}
	}
	direct, cancel := p.until(ctx, directShare)
	var fronts []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fronts = d.addrs.serviceServers(direct, servers, d.Service, targets)
	}()
	states := askEndpoints(direct, targets, name, d.Families)
	wg.Wait()
	cancel()
	if len(fronts) == 0 {
		// None of the node's servers is the Service: what failed is the
		// node's own resolver, whatever its endpoints answer.
		return nameResult{err: viaService}
	}
	verdict, failed := judgeBackends(states)
	switch verdict {
	case noBackendAnswers:
		// Not "degraded": with none answering, the node (or the whole
		// cluster DNS, which the fleet budget is for) is at fault.
		return nameResult{err: fmt.Errorf("%w; no endpoint of %s answered directly either: %w", viaService, d.Service, backendErrors(failed))}
	case everyBackendAnswers:
		again, cancel := p.until(ctx, retryShare)
		defer cancel()
		if err := resolveAny(again, fronts, name, d.Families); err != nil {
			return nameResult{err: fmt.Errorf("%w; every endpoint of %s asked answers directly, but its address does not answer from this node: %w", viaService, d.Service, err), backends: states}
		}
		return nameResult{backends: states}
	default:
		return nameResult{backends: states}
	}
}

// backendErrors joins the endpoints' errors.
func backendErrors(states []BackendState) error {
	errs := make([]error, len(states))
	for i, s := range states {
		errs[i] = s.Err
	}
	return errors.Join(errs...)
}
