//go:build e2e

// Package chart_test checks the Helm chart with the real helm, promtool and
// API server: lint, schema, server-side acceptance of every object, the
// own-node admission policy, and uninstall.
package chart_test

import (
	"context"
	"log"
	"path/filepath"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) {
	harness.MainWithControlPlane(m, harness.Options{Logf: log.Printf}, func(_ context.Context, c *harness.ControlPlane) error {
		cp = c
		var err error
		root, err = harness.RepoRoot()
		chart = filepath.Join(root, "charts", "kube-node-ready")
		return err
	})
}
