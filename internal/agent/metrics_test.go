package agent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A second registration on the same registry is an error the caller
// returns, not a panic.
func TestNewMetricsTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("second NewMetrics on one registry: no error")
	}
}
