package checks

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

func backend(ip string, failed bool) BackendState {
	s := BackendState{Endpoint: endpoints.Endpoint{Addr: netip.MustParseAddr(ip)}, Server: ip + ":53"}
	if failed {
		s.Err = errors.New("i/o timeout")
	}
	return s
}

func TestNextDegraded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	tests := []struct {
		name        string
		prev        map[netip.Addr]time.Time
		seen        []BackendState
		now         time.Time
		want        []netip.Addr
		wantStarted []netip.Addr
	}{
		{name: "a backend starts failing", seen: []BackendState{backend("10.0.0.1", true), backend("10.0.0.2", false)}, now: t0,
			want: []netip.Addr{a}, wantStarted: []netip.Addr{a}},
		{name: "it fails again: the same episode", prev: map[netip.Addr]time.Time{a: t0}, seen: []BackendState{backend("10.0.0.1", true)}, now: t0.Add(time.Minute),
			want: []netip.Addr{a}},
		{name: "a run that asked no backend keeps the episode", prev: map[netip.Addr]time.Time{a: t0}, now: t0.Add(9 * time.Minute),
			want: []netip.Addr{a}},
		{name: "not seen failing for the ttl: over", prev: map[netip.Addr]time.Time{a: t0}, now: t0.Add(10 * time.Minute)},
		{name: "seen answering: over", prev: map[netip.Addr]time.Time{a: t0}, seen: []BackendState{backend("10.0.0.1", false)}, now: t0.Add(time.Minute)},
		{name: "failing one name and answering another is failing", prev: map[netip.Addr]time.Time{a: t0},
			seen: []BackendState{backend("10.0.0.1", false), backend("10.0.0.1", true)}, now: t0.Add(time.Minute), want: []netip.Addr{a}},
		{name: "after the ttl a new episode", prev: map[netip.Addr]time.Time{a: t0}, seen: []BackendState{backend("10.0.0.1", true)}, now: t0.Add(11 * time.Minute),
			want: []netip.Addr{a}, wantStarted: []netip.Addr{a}},
		{name: "two start, in address order", seen: []BackendState{backend("10.0.0.2", true), backend("10.0.0.1", true)}, now: t0,
			want: []netip.Addr{a, b}, wantStarted: []netip.Addr{a, b}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, started := nextDegraded(tt.prev, tt.seen, tt.now, degradedFor)
			if len(next) != len(tt.want) {
				t.Errorf("degraded %v, want %v", next, tt.want)
			}
			for _, w := range tt.want {
				if _, ok := next[w]; !ok {
					t.Errorf("degraded %v, want %v", next, tt.want)
				}
			}
			var got []netip.Addr
			for _, s := range started {
				got = append(got, s.Endpoint.Addr)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantStarted) {
				t.Errorf("started %v, want %v", got, tt.wantStarted)
			}
		})
	}
}

// eventsSeen is an EventRecorder that keeps the Events.
type eventsSeen struct {
	mu     sync.Mutex
	events []string
	refs   []corev1.ObjectReference
}

func (e *eventsSeen) Eventf(ref corev1.ObjectReference, eventType, reason, action, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, eventType+" "+reason+" "+action+": "+fmt.Sprintf(format, args...))
	e.refs = append(e.refs, ref)
}

type oneNode struct{ node *corev1.Node }

func (o oneNode) GetNodeCached(_ context.Context, name string) (*corev1.Node, error) {
	if name != o.node.Name {
		return nil, errors.New("not found")
	}
	return o.node, nil
}

// TestBackendReportTellsOncePerEpisode: a degraded backend is told once
// per episode by a Warning Event on the node (with its UID, so kubectl
// describe node shows it), and the gauge follows the degraded backends; a
// backend flapping between failing and answering is told once per ttl.
func TestBackendReportTellsOncePerEpisode(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ev := &eventsSeen{}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: types.UID("uid-a")}}
	fc := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	r := NewBackendReport(m, ev, oneNode{node}, "node-a", nil, fc)
	d := &DNS{}
	ReportBackends([]Check{d, fakeCheck{"other", nil}}, r)
	if d.report != r {
		t.Fatal("the dns check was not given the report")
	}
	gauge := func() float64 { return testutil.ToFloat64(m.degraded.WithLabelValues("dns")) }
	if n := testutil.CollectAndCount(reg, "node_check_degraded_backends"); n != 1 || gauge() != 0 {
		t.Fatalf("before any run: %d series, dns at %v; want one at 0", n, gauge())
	}
	svc := endpoints.ServiceRef{Namespace: "kube-system", Name: "kube-dns"}
	broken, healthy := backend("10.0.0.2", true), backend("10.0.0.1", false)
	broken.Endpoint.NodeName = "node-b"
	steps := []struct {
		after      time.Duration
		seen       []BackendState
		wantEvents int
		wantGauge  float64
	}{
		{seen: []BackendState{healthy, broken}, wantEvents: 1, wantGauge: 1},
		{after: time.Minute, seen: []BackendState{healthy, broken}, wantEvents: 1, wantGauge: 1},
		{after: time.Minute, wantEvents: 1, wantGauge: 1},
		// Answering ends the episode; failing again at once is the flapping
		// told once per ttl.
		{after: time.Minute, seen: []BackendState{backend("10.0.0.2", false)}, wantEvents: 1, wantGauge: 0},
		{after: time.Minute, seen: []BackendState{broken}, wantEvents: 1, wantGauge: 1},
		{after: 11 * time.Minute, wantEvents: 1, wantGauge: 0},
		{after: time.Minute, seen: []BackendState{healthy, broken}, wantEvents: 2, wantGauge: 1},
	}
	for i, s := range steps {
		fc.SetTime(fc.Now().Add(s.after))
		d.report.Backends("dns", svc, s.seen)
		if len(ev.events) != s.wantEvents || gauge() != s.wantGauge {
			t.Fatalf("step %d: %d Events, gauge %v; want %d, %v", i, len(ev.events), gauge(), s.wantEvents, s.wantGauge)
		}
	}
	want := "Warning DNSBackendDegraded Check: dns: endpoint 10.0.0.2:53 of kube-system/kube-dns on node node-b fails while other endpoints answer (i/o timeout); not counted against this node"
	if ev.events[0] != want {
		t.Errorf("Event\n%s\nwant\n%s", ev.events[0], want)
	}
	if ref := ev.refs[0]; ref.Kind != "Node" || ref.Name != "node-a" || ref.UID != "uid-a" {
		t.Errorf("Event about %+v, want node node-a with its UID", ref)
	}
	if strings.Contains(fmt.Sprint(ev.events), "10.0.0.1") {
		t.Errorf("the healthy backend was told of: %v", ev.events)
	}
}
