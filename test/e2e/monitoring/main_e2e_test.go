//go:build e2e

// Package monitoring_test installs the chart with its ServiceMonitors,
// PrometheusRule and Grafana dashboard onto real nodes, with the real
// Prometheus Operator CRDs, and runs a real Prometheus (bin/prometheus, built by make tools) against it:
// discovery through the API server with the scrape configuration the
// ServiceMonitors describe, the chart's alert rules loaded, faults made on
// the cluster and the matching alerts seen firing; and every metric the
// alerts and the dashboard query is checked against what the binaries
// export.
package monitoring_test

import (
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
