//go:build e2e

// Package install_test installs the chart with the real helm into a cluster
// of real nodes (kubelet, containerd, runc, CNI, kube-proxy) and checks what a
// user sees: nothing but the chart runs the component under test, from the
// images `make images` built.
package install_test

import (
	"context"
	"log"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) {
	harness.MainWithCluster(m, harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, ProjectImages: true}, func(_ context.Context, cl *harness.Cluster) error {
		c = cl
		var err error
		chart, err = harness.ChartDir()
		return err
	})
}
