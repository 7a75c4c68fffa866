//go:build e2e

// Package netpol_test installs the chart with its NetworkPolicies on real
// nodes where SIG Network's reference enforcer, kube-network-policies,
// enforces them (harness.ClusterOptions.NetworkPolicies): the flows the
// chart needs pass, and a policy that cuts one fails a test.
package netpol_test

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
	opts := harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, ProjectImages: true, NetworkPolicies: true}
	harness.MainWithCluster(m, opts, func(_ context.Context, cl *harness.Cluster) error {
		c = cl
		var err error
		chart, err = harness.ChartDir()
		return err
	})
}
