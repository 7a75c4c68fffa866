//go:build e2e

// Package certmanager_test installs the chart with
// webhook.certificates.mode=cert-manager onto a real node that runs
// cert-manager's controller and CA injector (built from cert-manager's pinned
// module by `make tools`), and checks the whole path: cert-manager
// issues the webhook's Certificate, its CA injector writes the Secret's CA
// into the MutatingWebhookConfiguration, the webhook serves that certificate,
// and the API server's admission calls reach it over TLS — also after
// cert-manager renews the certificate, with no restart of the webhook.
package certmanager_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) {
	images, err := harness.CertManagerImages()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	// One real node carries everything: CoreDNS, cert-manager, the agent and
	// both webhook replicas.
	opts := harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, Nodes: 1, CoreDNSReplicas: 1, ProjectImages: true, Images: images}
	harness.MainWithCluster(m, opts, func(ctx context.Context, cl *harness.Cluster) error {
		c = cl
		if chart, err = harness.ChartDir(); err != nil {
			return err
		}
		if err := c.DeployCertManager(ctx); err != nil {
			return fmt.Errorf("cert-manager: %w", err)
		}
		return nil
	})
}
