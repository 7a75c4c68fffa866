//go:build e2e

// Package lifecycle_test installs the chart with the real helm into a
// cluster of real nodes, as test/e2e/install does on a cluster of its own,
// and takes it through its life: helm upgrade, remediation replacing a node
// that never verifies, helm uninstall.
package lifecycle_test

import (
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/installkit"
)

var kit installkit.Kit

func TestMain(m *testing.M) { installkit.Main(m, &kit) }
