package checks

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

// degradedFor is how long a backend seen failing counts as degraded
// without being seen again: a check asks the backends directly only when
// a query through the Service failed, so a broken backend is not seen every
// round. A backend seen answering directly is well again at once.
const degradedFor = 10 * time.Minute

// EventRecorder records an Event about an object (agent.Recorder).
type EventRecorder interface {
	Eventf(ref corev1.ObjectReference, eventType, reason, action, format string, args ...any)
}

// BackendReporter hears what a check found when it asked the endpoints of
// a shared Service directly: news about the cluster, never a failure of
// the node.
type BackendReporter interface {
	// Backends is called after every run of check with the endpoints of svc
	// it asked directly (none when it had no reason to ask).
	Backends(check string, svc endpoints.ServiceRef, seen []BackendState)
}

// backendReporting is a check that reports the backends it asked.
type backendReporting interface {
	Check
	reportBackendsTo(r BackendReporter)
}

// ReportBackends has every check of cs that asks the backends of a shared
// Service (the dns check) report them to r; the agent calls it once,
// before the checks run.
func ReportBackends(cs []Check, r *BackendReport) {
	for _, c := range cs {
		if rc, ok := c.(backendReporting); ok {
			rc.reportBackendsTo(r)
			r.start(rc.Name())
		}
	}
}

// BackendReport tells of degraded backends once per episode: a Warning
// Event on the node (api.EventDNSBackendDegraded) and a log line when a
// backend starts failing while others answer, and the gauge
// node_check_degraded_backends{check} all along. An episode ends when the
// backend is seen answering, or is not seen failing for degradedFor.
type BackendReport struct {
	metrics  *Metrics
	recorder EventRecorder
	nodes    NodeGetter
	nodeName string
	log      *slog.Logger
	// clock decides when an episode ends (degradedFor).
	clock clock.PassiveClock

	mu sync.Mutex
	// degraded holds, per check, when each degraded backend was last seen failing.
	degraded map[string]map[netip.Addr]time.Time
	// told holds when each backend's episode was last told: a backend that
	// flaps between failing and answering is told once per degradedFor.
	told map[netip.Addr]time.Time
}

// NewBackendReport returns a report that sets m's gauge and records Events
// on the node nodeName (read through nodes for its UID) with recorder,
// episodes timed on clk; any of them may be nil (clk: the real clock).
func NewBackendReport(m *Metrics, recorder EventRecorder, nodes NodeGetter, nodeName string, log *slog.Logger, clk clock.PassiveClock) *BackendReport {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &BackendReport{metrics: m, recorder: recorder, nodes: nodes, nodeName: nodeName, log: log, clock: clk,
		degraded: map[string]map[netip.Addr]time.Time{}, told: map[netip.Addr]time.Time{}}
}

// start shows check's gauge at zero from the first scrape.
func (r *BackendReport) start(check string) {
	if r.metrics != nil {
		r.metrics.degraded.WithLabelValues(check).Set(0)
	}
}

// Backends implements BackendReporter.
func (r *BackendReport) Backends(check string, svc endpoints.ServiceRef, seen []BackendState) {
	now := r.clock.Now()
	r.mu.Lock()
	next, started := nextDegraded(r.degraded[check], seen, now, degradedFor)
	r.degraded[check] = next
	var tell []BackendState
	for a, at := range r.told {
		if now.Sub(at) >= degradedFor {
			delete(r.told, a)
		}
	}
	for _, b := range started {
		if _, recent := r.told[b.Endpoint.Addr]; !recent {
			r.told[b.Endpoint.Addr] = now
			tell = append(tell, b)
		}
	}
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.degraded.WithLabelValues(check).Set(float64(len(next)))
	}
	for _, b := range tell {
		r.tell(check, svc, b)
	}
}

// tell logs and records the start of a backend's episode.
func (r *BackendReport) tell(check string, svc endpoints.ServiceRef, b BackendState) {
	where := ""
	if b.Endpoint.NodeName != "" {
		where = " on node " + b.Endpoint.NodeName
	}
	r.log.Warn("endpoint of a shared Service fails while others answer; not counted against this node",
		"check", check, "service", svc.String(), "endpoint", b.Server, "endpoint_node", b.Endpoint.NodeName, "error", b.Err)
	if r.recorder == nil || r.nodes == nil {
		return
	}
	// The node's UID makes the Event show in kubectl describe node; the
	// read comes from the API server's watch cache, once per episode.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: r.nodeName}
	if n, err := r.nodes.GetNodeCached(ctx, r.nodeName); err == nil {
		ref.UID = n.UID
	}
	note := fmt.Sprintf("%s: endpoint %s of %s%s fails while other endpoints answer (%v); not counted against this node",
		check, b.Server, svc, where, b.Err)
	r.recorder.Eventf(ref, corev1.EventTypeWarning, api.EventDNSBackendDegraded, "Check", "%s", eventnote.Shorten(note))
}

// nextDegraded is the set of degraded backends after a run saw seen at
// now: those of prev still within ttl of being seen failing, less those
// seen answering, plus those seen failing. started are the backends whose
// episode begins with this run, in address order.
func nextDegraded(prev map[netip.Addr]time.Time, seen []BackendState, now time.Time, ttl time.Duration) (map[netip.Addr]time.Time, []BackendState) {
	next := make(map[netip.Addr]time.Time, len(prev))
	for a, at := range prev {
		if now.Sub(at) < ttl {
			next[a] = at
		}
	}
	// A backend asked for several names is degraded when any failed.
	failing := map[netip.Addr]BackendState{}
	answering := map[netip.Addr]bool{}
	for _, s := range seen {
		a := s.Endpoint.Addr
		if s.Err != nil {
			if _, ok := failing[a]; !ok {
				failing[a] = s
			}
		} else {
			answering[a] = true
		}
	}
	for a := range answering {
		if _, ok := failing[a]; !ok {
			delete(next, a)
		}
	}
	var started []BackendState
	for a, s := range failing {
		if _, ok := next[a]; !ok {
			started = append(started, s)
		}
		next[a] = now
	}
	sort.Slice(started, func(i, j int) bool { return started[i].Endpoint.Addr.Less(started[j].Endpoint.Addr) })
	return next, started
}
