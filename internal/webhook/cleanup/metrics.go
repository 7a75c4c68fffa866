package cleanup

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the per-plugin series; no label grows with the cluster.
type Metrics struct {
	operations *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

// NewMetrics registers the plugin metrics on reg; nil reg gives unregistered
// metrics (tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_cleanup_operations_total",
			Help: "Cleanup plugin runs by plugin and result (success, failure, timeout, panic, skipped, dry_run, unhealthy).",
		}, []string{"plugin", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "node_cleanup_duration_seconds",
			Help:    "Time one cleanup plugin run took, by plugin.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"plugin"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.operations, m.duration} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("cleanup: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *Metrics) observe(plugin, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.operations.WithLabelValues(plugin, result).Inc()
	if result != ResultSkipped && result != ResultUnhealthy {
		m.duration.WithLabelValues(plugin).Observe(d.Seconds())
	}
}
