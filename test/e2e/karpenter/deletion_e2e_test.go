//go:build e2e

package karpenter

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// karpenterTermination is Karpenter's finalizer on its Nodes and NodeClaims.
const karpenterTermination = "karpenter.sh/termination"

// verifiedNode scales pool up for one pod, waits until the pod is bound to
// the verified node, deletes the pod and returns the node's and its
// NodeClaim's names.
func (e *env) verifiedNode(t *testing.T, pool, podName string) (node, claim string) {
	t.Helper()
	e.pendingPod(t, podName, pool)
	harness.Eventually(t, 90*time.Second, "pod "+podName+" bound", func() (bool, string) {
		p := e.pod(t, podName)
		return p != nil && p.Spec.NodeName != "", ""
	})
	node = e.pod(t, podName).Spec.NodeName
	for _, c := range e.claims(t, pool) {
		if claimProviderNode(c) == node {
			claim = c.GetName()
		}
	}
	if n := e.node(t, node); n == nil || !slices.Contains(n.Finalizers, harness.Finalizer) {
		t.Fatalf("node %s does not carry our finalizer", node)
	}
	e.deletePod(t, podName)
	return node, claim
}

// deletion follows a node from its deletion until it and its NodeClaim
// are gone, and returns how long the Node was held: from its
// deletionTimestamp (the API server's, in whole seconds, so this reads up
// to a second long) to the first poll that found it gone.
func (e *env) deletion(t *testing.T, node, claim string, timeout time.Duration) time.Duration {
	t.Helper()
	var deletedAt time.Time
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n := e.node(t, node)
		if n != nil && n.DeletionTimestamp != nil {
			deletedAt = n.DeletionTimestamp.Time
		}
		_, err := e.dyn.Resource(harness.NodeClaims).Get(ctx, claim, metav1.GetOptions{})
		return n == nil && apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("node %s and NodeClaim %s not gone within %s", node, claim, timeout)
	}
	if deletedAt.IsZero() {
		t.Fatalf("node %s went without ever being seen Terminating", node)
	}
	return time.Since(deletedAt)
}

// Deletion, by `kubectl delete nodeclaim`: Karpenter drains and deletes
// the Node; our finalizer holds it until our cleanup ran (the hook received
// the node); then Karpenter's termination completes (Node and NodeClaim
// gone).
func (e *env) testDeleteNodeClaim(t *testing.T) {
	const pool = "delete"
	e.pool(t, pool, harness.NodePoolOptions{StartupTaints: []corev1.Taint{ourTaint}}, []string{})
	node, claim := e.verifiedNode(t, pool, "delete-0")
	e.cp.KubectlT(t, "", "delete", "nodeclaim", claim, "--wait=false")
	held := e.deletion(t, node, claim, time.Minute)
	if calls := e.hook.callsFor(node); len(calls) != 1 {
		t.Errorf("cleanup hook called %d times for %s, want 1", len(calls), node)
	}
	t.Logf("figure: kubectl delete nodeclaim: Node held %s by our finalizer and Karpenter's termination together, cleanup hook called once", r(held))
}

// Deletion by consolidation with a failing critical plugin: the held
// pool's node (its hook refused) empties, Karpenter consolidates it, our
// cleanup fails attempt after attempt, and --cleanup-deadline releases the
// Node: it is held no longer than the deadline (plus a retry), and
// Karpenter's termination then completes. Karpenter does not wait for our
// finalizer to terminate the instance: while ours still holds the Node, its
// own (karpenter.sh/termination) is gone and the NodeClaim says
// InstanceTerminating, so what ours holds is the Node and NodeClaim objects.
func (e *env) testDeleteHeld(t *testing.T) {
	const pool = "held"
	e.pool(t, pool, harness.NodePoolOptions{
		StartupTaints: []corev1.Taint{ourTaint},
		Labels:        map[string]string{failCleanupLabel: "fail"},
		Consolidation: "WhenEmpty",
	}, []string{})
	node, claim := e.verifiedNode(t, pool, "held-0")
	harness.Eventually(t, 2*time.Minute, "Karpenter done with the instance while our finalizer holds the Node", func() (bool, string) {
		n := e.node(t, node)
		if n == nil || n.DeletionTimestamp == nil {
			return false, "not being deleted yet"
		}
		if !slices.Contains(n.Finalizers, harness.Finalizer) {
			t.Fatalf("node %s lost our finalizer before the deadline: %v", node, n.Finalizers)
		}
		c, err := e.dyn.Resource(harness.NodeClaims).Get(t.Context(), claim, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(n.Finalizers, karpenterTermination) && claimCondition(*c, "InstanceTerminating"),
			fmt.Sprintf("finalizers %v, NodeClaim InstanceTerminating %v", n.Finalizers, claimCondition(*c, "InstanceTerminating"))
	})
	held := e.deletion(t, node, claim, cleanupDeadline+time.Minute)
	calls := e.hook.callsFor(node)
	if len(calls) < 2 {
		t.Errorf("cleanup hook called %d times for %s before the deadline released it, want at least 2 attempts", len(calls), node)
	}
	if held < cleanupDeadline {
		t.Errorf("node %s released after %s, before --cleanup-deadline=%s", node, held, cleanupDeadline)
	}
	if limit := cleanupDeadline + 10*time.Second; held > limit {
		t.Errorf("node %s held %s, past --cleanup-deadline=%s by more than a retry", node, held, cleanupDeadline)
	}
	if len(e.cp.EventNotes(t, "Node", node, api.EventCleanupDeadlineExceeded)) == 0 {
		t.Errorf("no %s Event on %s", api.EventCleanupDeadlineExceeded, node)
	}
	t.Logf("figure: consolidation with a failing critical plugin: Node held %s (--cleanup-deadline=%s, %d hook attempts)", r(held), cleanupDeadline, len(calls))
}
