//go:build e2e

package karpenter

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// repairAddr is the HTTP endpoint the repair pool's agents probe.
const repairAddr = "10.213.0.32:9000"

// Karpenter's counters of node repair: its health controller's reconciles
// (the positive signal that it looked at the node after our condition
// changed) and the NodeClaims it disrupted as unhealthy.
const (
	healthReconciles  = "controller_runtime_reconcile_total"
	unhealthyRepaired = "karpenter_nodeclaims_disrupted_total"
)

// Repair, with Karpenter's NodeRepair on: the repair pool's node verifies,
// then its agent's checks fail and it re-taints the node (our unhealthy
// taint, verified=false, our KubeNodeReady condition False). Karpenter's
// health controller looks at the node (its reconciles grow) and repairs
// nothing: the KWOK provider's RepairPolicies name only Ready False or
// Unknown, for 10 minutes. The node verified once, so it serves: with
// --remediation-replace-retainted kube-node-ready's remediation replaces it
// at --unverified-deadline only by deleting its NodeClaim, once, and
// Karpenter's termination drains and removes the node.
func (e *env) testRepair(t *testing.T) {
	const pool = "repair"
	probe := &health{}
	harness.ServeHTTP(t, repairAddr, probe)
	e.pool(t, pool, harness.NodePoolOptions{StartupTaints: []corev1.Taint{ourTaint}},
		[]string{"--checks=api,probe", "--check.probe.targets=http://" + repairAddr + "/healthz", "--check-period=1s", "--retaint-threshold=2", "--fleet-budget=2"})
	e.pendingPod(t, "repair-0", pool)
	harness.Eventually(t, 90*time.Second, "pod repair-0 bound", func() (bool, string) {
		p := e.pod(t, "repair-0")
		return p != nil && p.Spec.NodeName != "", ""
	})
	node := e.pod(t, "repair-0").Spec.NodeName
	reconciles := e.karpMetric(t, healthReconciles, `controller="node.health"`)
	replaced := e.w.Metric(t, "node_remediation_actions_total", `action="delete_nodeclaim"`, `result="success"`)

	probe.fail()
	failedAt := time.Now()
	n := e.cp.WaitNode(t, node, time.Minute, "re-tainted by its agent", func(n *corev1.Node) bool {
		return hasTaint(n, harness.UnhealthyTaint.Key) && n.Labels[api.VerifiedLabel] == "false" && condition(n, api.ConditionType) == corev1.ConditionFalse
	})
	retainted := time.Since(failedAt)
	harness.Eventually(t, time.Minute, "Karpenter's health controller reconciled the re-tainted node", func() (bool, string) {
		return e.karpMetric(t, healthReconciles, `controller="node.health"`) > reconciles, ""
	})
	if ready := condition(n, string(corev1.NodeReady)); ready != corev1.ConditionTrue {
		t.Fatalf("node %s Ready=%s: KWOK keeps it True, the scenario needs that", node, ready)
	}
	harness.Eventually(t, deadline+30*time.Second, "our remediation deletes the re-tainted node's NodeClaim", func() (bool, string) {
		if v := e.karpMetric(t, unhealthyRepaired, `reason="unhealthy"`); v != 0 {
			t.Fatalf("Karpenter repaired %v NodeClaims as unhealthy: the two fight over the node", v)
		}
		return e.w.Metric(t, "node_remediation_actions_total", `action="delete_nodeclaim"`, `result="success"`) > replaced, ""
	})
	replacedAfter := time.Since(failedAt)
	e.cp.WaitEvent(t, 10*time.Second, "Node", node, api.EventNodeReplacing, "")
	e.cp.WaitNodeGone(t, node, time.Minute)
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="delete_nodeclaim"`, `result="success"`) - replaced; got != 1 {
		t.Errorf("our remediation deleted %v NodeClaims, want 1", got)
	}
	if v := e.karpMetric(t, unhealthyRepaired, `reason="unhealthy"`); v != 0 {
		t.Errorf("Karpenter repaired %v NodeClaims as unhealthy", v)
	}
	t.Logf("figure: repair: re-tainted %s after its checks began failing; Karpenter's health controller reconciled it and repaired nothing; our remediation deleted its NodeClaim %s after the failure (--unverified-deadline=%s)",
		r(retainted), r(replacedAfter), deadline)
}

// karpMetric reads one of Karpenter's metrics (0 when it has no sample).
func (e *env) karpMetric(t *testing.T, name string, match ...string) float64 {
	t.Helper()
	v, err := e.karp.Metric(name, match...)
	if err != nil {
		t.Fatalf("karpenter metrics: %v", err)
	}
	return v
}

// condition is the status of the node's condition typ ("" when absent).
func condition(n *corev1.Node, typ string) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if string(c.Type) == typ {
			return c.Status
		}
	}
	return ""
}

// health answers the repair pool's agents' probe: 200 while healthy, 503
// after fail.
type health struct{ failing atomic.Bool }

func (h *health) fail() { h.failing.Store(true) }

func (h *health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if h.failing.Load() {
		http.Error(w, "failing on purpose", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}
