//go:build e2e

// Package nrc tests publish mode, beside the node readiness controller:
// the NodeReadinessRules docs/autoscalers.md documents against a CRD
// written from the controller's API (testdata/), and the real agent in
// publish mode under the chart's RBAC and policies, on the real API server
// of the test harness. The controller itself is not served by the Go
// module proxy and does not run here (docs/autoscalers.md says what that
// leaves out).
package nrc

import (
	"context"
	"log"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/agentkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	cp  *harness.ControlPlane
	kit agentkit.Kit
)

func TestMain(m *testing.M) {
	harness.MainWithControlPlane(m, harness.Options{Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		kit = agentkit.Kit{CP: c}
		// The agent's policy in publish mode with per-check conditions: the
		// widest the mode renders.
		if err := cp.ApplyChartRBAC(ctx, harness.AgentNamespace, "mode=publish", "agent.publishConditions=per-check"); err != nil {
			return err
		}
		return installCRD(ctx)
	})
}

// installCRD applies testdata's NodeReadinessRule CRD and waits until the
// API server serves it.
func installCRD(ctx context.Context) error {
	const crd = "testdata/nodereadinessrules-crd.yaml"
	if _, err := cp.Kubectl(ctx, nil, "apply", "--server-side", "-f", crd); err != nil {
		return err
	}
	_, err := cp.Kubectl(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s", "-f", crd)
	return err
}
