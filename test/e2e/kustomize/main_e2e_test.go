//go:build e2e

// Package kustomize_test checks manifests/ the way kustomize users use it:
// what the base, each overlay and every mix of the components build with the
// real kubectl is what `helm template` renders with the same values, the
// real API server accepts all of it with server-side apply, and the
// documented uninstall leaves no node with our finalizer.
package kustomize_test

import (
	"context"
	"log"
	"path/filepath"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) {
	harness.MainWithControlPlane(m, harness.Options{Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		var err error
		root, err = harness.RepoRoot()
		if err != nil {
			return err
		}
		manifests = filepath.Join(root, "manifests")
		chart = filepath.Join(root, "charts", "kube-node-ready")
		// The components' ServiceMonitors, PrometheusRule, Certificate and
		// Issuer must be accepted by the real CRDs' schemas.
		for _, tool := range []string{"prometheus-operator", "cert-manager"} {
			if err := c.InstallCRDs(ctx, tool); err != nil {
				return err
			}
		}
		return nil
	})
}
