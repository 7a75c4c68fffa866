package admission

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// newMetrics registers the admission series on reg, failing tb if it cannot.
func newMetrics(tb testing.TB, reg prometheus.Registerer) *Metrics {
	tb.Helper()
	m, err := NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// A second registration on the same registry is an error the caller
// returns, not a panic.
func TestNewMetricsTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(t, reg)
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("second NewMetrics on one registry: no error")
	}
}
