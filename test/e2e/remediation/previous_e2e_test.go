//go:build e2e

package remediation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestPreviousKeysAreUnverified: under the default preset, a node that
// still carries a previous key — the seed startup or unhealthy taint, or a
// key given to --previous-taint-keys — is unverified like one carrying the
// preset's key: past the deadline it is reported, naming the key.
func TestPreviousKeysAreUnverified(t *testing.T) {
	e := start(t, false, nil, "--remediation=report", "--previous-taint-keys=example.com/old")
	seedUnhealthy := corev1.Taint{Key: api.UnhealthyTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	old := corev1.Taint{Key: "example.com/old", Effect: corev1.TaintEffectNoExecute}
	e.node(t, "seed-startup", harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{harness.SeedStartupTaint}})
	e.node(t, "seed-unhealthy", harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{seedUnhealthy},
		Labels: map[string]string{api.VerifiedLabel: "false"}})
	e.node(t, "user-key", harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{old}})
	e.waitEvent(t, "seed-startup", api.EventNodeUnverifiedPastDeadline, "carries "+api.StartupTaintKey+" for")
	e.waitEvent(t, "seed-unhealthy", api.EventNodeUnverifiedPastDeadline, "carries "+api.UnhealthyTaintKey+" for")
	e.waitEvent(t, "user-key", api.EventNodeUnverifiedPastDeadline, "carries example.com/old for")
}
