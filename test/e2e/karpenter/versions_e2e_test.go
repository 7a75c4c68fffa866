//go:build e2e

package karpenter

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// registerWithReadinessKey puts the Karpenter preset's startup taint on
// every new Node of the versions pool at CREATE, as a kubelet's
// --register-with-taints does, by a MutatingAdmissionPolicy: the pool does
// not declare it in startupTaints, and no webhook of ours adds it.
var registerWithReadinessKey = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: knr-e2e-register-with-readiness-key
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [nodes]
  matchConditions:
  - name: versions-pool
    expression: "has(object.metadata.labels) && object.metadata.labels[?'knr-e2e/pool'].orValue('') == 'versions'"
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "add", path: "/spec/taints/-", value: Object.spec.taints{key: "` + api.KarpenterStartupTaintKey + `", value: "true", effect: "NoSchedule"}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: knr-e2e-register-with-readiness-key
spec:
  policyName: knr-e2e-register-with-readiness-key
`

// The readiness key at registration, undeclared (Karpenter v1.14.1, which
// ignores keys under readiness.k8s.io/ from v1.13.0): the versions pool
// declares no startup taint, and its Nodes are created carrying
// readiness.k8s.io/node-ready, as a kubelet registering with the taint
// makes them. Its node never verifies (protected from remediation). Until
// Karpenter has simulated the pending pod 30 more times and the node's agent
// has failed 10 more rounds (holdRounds), at every poll one NodeClaim and
// never a second for it; the NodeClaim is not Initialized because the key is there
// (Karpenter waits for it, reason KnownEphemeralTaintsExist), so the node
// is not consolidated either.
func (e *env) testReadinessKeyAtRegistration(t *testing.T) {
	const pool = "versions"
	e.cp.KubectlT(t, registerWithReadinessKey, "apply", "-f", "-")
	t.Cleanup(func() {
		e.cp.KubectlT(t, "", "delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", "knr-e2e-register-with-readiness-key", "--ignore-not-found")
	})
	agents := e.pool(t, pool, harness.NodePoolOptions{
		Annotations: map[string]string{"infra.894.io/protect": "true"},
	}, append([]string{"--autoscaler=karpenter", runawayAgentPeriod}, neverVerifies...))
	e.pendingPod(t, "versions-0", pool)
	w := e.watchClaims(pool)
	var node string
	harness.Eventually(t, time.Minute, "a NodeClaim launched and its Node registered with the readiness key", func() (bool, string) {
		alive := w.poll(t, 1)
		if len(alive) == 0 {
			return false, "no NodeClaim yet"
		}
		n := e.node(t, claimProviderNode(alive[0]))
		if n == nil || hasTaint(n, "karpenter.sh/unregistered") {
			return false, "node not registered"
		}
		if !hasTaint(n, api.KarpenterStartupTaintKey) {
			t.Fatalf("node %s registered without %s: taints %v", n.Name, api.KarpenterStartupTaintKey, n.Spec.Taints)
		}
		node = n.Name
		return true, ""
	})
	grown, ran, took := w.holdRounds(t, 1, agents, node)
	if len(w.seen) != 1 {
		t.Fatalf("pool %s: %d NodeClaims for one pending pod while its node carried %s, want 1", pool, len(w.seen), api.KarpenterStartupTaintKey)
	}
	alive := live(e.claims(t, pool))
	if len(alive) != 1 || claimProviderNode(alive[0]) != node {
		t.Fatalf("pool %s: NodeClaims alive %v, want the one of node %s", pool, names(alive), node)
	}
	if status, reason := claimConditionOf(alive[0], "Initialized"); status == "True" || reason != "KnownEphemeralTaintsExist" {
		t.Errorf("NodeClaim %s Initialized=%s (%s), want not initialized while %s is on its node (KnownEphemeralTaintsExist)",
			alive[0].GetName(), status, reason, api.KarpenterStartupTaintKey)
	}
	if n := e.node(t, node); n == nil || n.DeletionTimestamp != nil || !hasTaint(n, api.KarpenterStartupTaintKey) {
		t.Errorf("node %s after %v of Karpenter's rounds: %v, want it there, not being deleted, still carrying %s", node, grown, n, api.KarpenterStartupTaintKey)
	}
	if p := e.pod(t, "versions-0"); p.Spec.NodeName != "" {
		t.Errorf("pod bound to %s while it carried the startup taint", p.Spec.NodeName)
	}
	t.Logf("figure: readiness.k8s.io/node-ready at registration, NodePool declaring nothing (Karpenter v1.14.1): %d NodeClaim for 1 pending pod while Karpenter simulated it %v times and the agent failed %v rounds (%s)",
		len(w.seen), grown, ran, took.Round(time.Second))
}

// claimConditionOf is the status and reason of the NodeClaim's condition
// typ; empty when it has none.
func claimConditionOf(c unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, raw := range conds {
		if m, ok := raw.(map[string]any); ok && m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			return status, reason
		}
	}
	return "", ""
}
