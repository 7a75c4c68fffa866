package admission

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values the handler can record; the cache below is indexed by them.
var (
	operationLabels = [...]string{"CREATE", "UPDATE", "DELETE", "CONNECT", opUnknown}
	resultLabels    = [...]string{ResultPatched, ResultPresent, ResultIgnored, ResultInvalid, ResultPanic, ResultBadRequest, ResultTooLarge}
)

// Metrics are the admission handler's Prometheus series.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	// Children are looked up once and cached: WithLabelValues hashes and
	// locks on every call. Filled lazily, so /metrics lists only series that
	// have been recorded, as before.
	counters  [len(operationLabels)][len(resultLabels)]atomic.Pointer[prometheus.Counter]
	observers [len(operationLabels)]atomic.Pointer[prometheus.Observer]
}

// NewMetrics registers the admission series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
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
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *Metrics) observe(operation, result string, d time.Duration) {
	if m == nil {
		return
	}
	o, r := labelIndex(operationLabels[:], operation), labelIndex(resultLabels[:], result)
	if o < 0 || r < 0 {
		// Not a label the handler records; stay correct, uncached.
		m.requests.WithLabelValues(operation, result).Inc()
		m.duration.WithLabelValues(operation).Observe(d.Seconds())
		return
	}
	c := m.counters[o][r].Load()
	if c == nil {
		child := m.requests.WithLabelValues(operation, result)
		c = &child
		m.counters[o][r].Store(c)
	}
	(*c).Inc()
	obs := m.observers[o].Load()
	if obs == nil {
		child := m.duration.WithLabelValues(operation)
		obs = &child
		m.observers[o].Store(obs)
	}
	(*obs).Observe(d.Seconds())
}

func labelIndex(labels []string, v string) int {
	for i, l := range labels {
		if l == v {
			return i
		}
	}
	return -1
}
