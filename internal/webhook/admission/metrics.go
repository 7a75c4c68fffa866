package admission

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
)

// Metrics are the admission handler's Prometheus series.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	startup  *prometheus.CounterVec
	hint     *prometheus.CounterVec
}

// NewMetrics registers the admission series on reg; it fails when one of them
// is already there.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_cleanup_webhook_requests_total",
			Help: "Admission requests answered, by operation and result (patched, present, ignored, invalid, panic, bad_request, too_large).",
		}, []string{"operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "node_cleanup_webhook_duration_seconds",
			Help:    "Time to answer an admission request, by operation.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5},
		}, []string{"operation"}),
		startup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_cleanup_webhook_startup_taint_total",
			Help: "Node creations whose startup taint admission decided, by outcome (added, present, not-selected, no-key, off).",
		}, []string{"outcome"}),
		hint: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_cleanup_webhook_peer_slices_hint_total",
			Help: "Node creations admitted with --check.network.peer-service set, by what became of the peer slices' hint (added; no-names: the watch of the slices' names had not listed, or the Service had none; unreadable: no node name, or the patch failed).",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.startup, m.hint} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("admission: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observe(operation, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(operation, result).Inc()
	m.duration.WithLabelValues(operation).Observe(d.Seconds())
}

func (m *Metrics) observeStartupTaint(outcome startuptaint.Outcome) {
	if m == nil {
		return
	}
	m.startup.WithLabelValues(string(outcome)).Inc()
}

// Outcomes of the peer slices' hint in node_cleanup_webhook_peer_slices_hint_total.
const (
	HintAdded      = "added"
	HintNoNames    = "no-names"
	HintUnreadable = "unreadable"
)

func (m *Metrics) observeHint(outcome string) {
	if m == nil {
		return
	}
	m.hint.WithLabelValues(outcome).Inc()
}
