//go:build e2e

// Package gitops_test installs, changes and removes the chart the way
// GitOps tools do: rendered by `helm template` (no lookup, no Helm hooks),
// applied with kubectl, objects no longer rendered pruned, the webhook run
// as a process with the rendered Deployment's flags under its
// ServiceAccount, and the rendered removal Job's command run under the Job's
// ServiceAccount (the harness runs no kubelet to run Jobs). Each step checks
// that no node's deletion is stuck.
package gitops_test

import (
	"context"
	"log"
	"path/filepath"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	cp    *harness.ControlPlane
	chart string
)

func TestMain(m *testing.M) {
	harness.MainWithControlPlane(m, harness.Options{Logf: log.Printf}, func(_ context.Context, c *harness.ControlPlane) error {
		cp = c
		root, err := harness.RepoRoot()
		if err != nil {
			return err
		}
		chart = filepath.Join(root, "charts", "kube-node-ready")
		return nil
	})
}
