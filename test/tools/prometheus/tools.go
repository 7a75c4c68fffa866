//go:build tools

// Package tools pins the Prometheus server and promtool the monitoring tests
// run (test/e2e/monitoring). Debian's prometheus package is built without
// Kubernetes service discovery, which those tests need; make tools builds
// these with only that discovery (-tags remove_all_sd,enable_kubernetes_sd).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
