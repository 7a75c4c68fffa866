//go:build e2e

// Package externalnames_test installs the chart on real nodes with external
// names for the agents' dns check and runs `kubectl node-ready doctor`,
// which says which of them does not resolve from the webhook's pod.
package externalnames_test

import (
	"context"
	"log"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	c     *harness.Cluster
	chart string
)

func TestMain(m *testing.M) {
	harness.MainWithCluster(m, harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, ProjectImages: true}, func(_ context.Context, cl *harness.Cluster) error {
		c = cl
		var err error
		chart, err = harness.ChartDir()
		return err
	})
}
