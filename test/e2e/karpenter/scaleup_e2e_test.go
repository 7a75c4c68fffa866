//go:build e2e

package karpenter

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// scaleUpRuns is how many scale-ups each pool makes; the figures are their
// medians.
const scaleUpRuns = 3

// timeline is when each step of one scale-up was first seen, from the pod's
// creation (zero: not seen).
type timeline struct {
	claim, node, registered, verified, initialized, bound time.Duration
}

func (tl timeline) String() string {
	return fmt.Sprintf("NodeClaim +%s, Node +%s, registered +%s, verified +%s, Initialized +%s, pod bound +%s",
		r(tl.claim), r(tl.node), r(tl.registered), r(tl.verified), r(tl.initialized), r(tl.bound))
}

func r(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// Scale-up: a pending pod makes Karpenter launch a NodeClaim; its Node
// carries our startup taint (declared in the pool's startupTaints); the
// agent verifies it; Karpenter marks the NodeClaim Initialized; the pod is
// bound. The same without our taint and agent, run by run in turn, gives
// kube-node-ready's overhead on "pod pending → bound".
func (e *env) testScaleUp(t *testing.T) {
	e.pool(t, "up-knr", harness.NodePoolOptions{StartupTaints: []corev1.Taint{ourTaint}}, []string{})
	e.pool(t, "up-plain", harness.NodePoolOptions{}, nil)
	// Pending → bound is what a user waits for; registered → bound is the
	// part kube-node-ready adds to (Karpenter's launch before it varies
	// more from run to run on a busy machine than the agent's work).
	var withKNR, without, withAfterReg, withoutAfterReg []time.Duration
	for i := range scaleUpRuns {
		tl := e.scaleUp(t, fmt.Sprintf("up-knr-%d", i), "up-knr", true)
		t.Logf("figure: scale-up with kube-node-ready, run %d: %s", i+1, tl)
		withKNR, withAfterReg = append(withKNR, tl.bound), append(withAfterReg, tl.bound-tl.registered)
		tl = e.scaleUp(t, fmt.Sprintf("up-plain-%d", i), "up-plain", false)
		t.Logf("figure: scale-up without kube-node-ready, run %d: %s", i+1, tl)
		without, withoutAfterReg = append(without, tl.bound), append(withoutAfterReg, tl.bound-tl.registered)
	}
	t.Logf("figure: scale-up, median of %d: pod pending → bound %s with kube-node-ready's taint and agent, %s without (overhead %s); Node registered → pod bound %s with, %s without",
		scaleUpRuns, r(median(withKNR)), r(median(without)), r(median(withKNR)-median(without)),
		r(median(withAfterReg)), r(median(withoutAfterReg)))
}

// scaleUp creates a pending pod for pool, follows it to bound, checks the
// order of the steps, then deletes the pod and empties the pool.
func (e *env) scaleUp(t *testing.T, podName, pool string, knr bool) timeline {
	t.Helper()
	start := time.Now()
	e.pendingPod(t, podName, pool)
	// Each poll reads the pod, then the NodeClaim, then the Node, and dates
	// what it saw by the poll's start: the pod cannot be bound, nor the
	// NodeClaim Initialized, while the Node carries our taint, so a Node
	// read after them shows it verified, in the same poll at the latest.
	var tl timeline
	var nodeName string
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		at := time.Since(start)
		seen := func(d *time.Duration) {
			if *d == 0 {
				*d = at
			}
		}
		if p := e.pod(t, podName); p != nil && p.Spec.NodeName != "" {
			seen(&tl.bound)
		}
		if claims := e.claims(t, pool); len(claims) > 0 {
			seen(&tl.claim)
			if nodeName == "" {
				nodeName = claimProviderNode(claims[0])
			}
			if claimCondition(claims[0], "Initialized") {
				seen(&tl.initialized)
			}
		}
		if n := e.node(t, nodeName); n != nil {
			seen(&tl.node)
			if !hasTaint(n, "karpenter.sh/unregistered") {
				seen(&tl.registered)
			}
			if knr && !hasTaint(n, api.StartupTaintKey) && n.Labels[api.VerifiedLabel] == "true" {
				seen(&tl.verified)
			}
		}
		return tl.bound != 0 && tl.initialized != 0, nil
	})
	if err != nil {
		t.Fatalf("pod %s of pool %s not bound, or its NodeClaim not Initialized, within 90s; so far: %s", podName, pool, tl)
	}
	if knr && (tl.verified == 0 || tl.verified > tl.bound || tl.verified > tl.initialized) {
		t.Errorf("%s: pod bound or NodeClaim Initialized before the agent verified the node: %s", pool, tl)
	}
	if p := e.pod(t, podName); p.Spec.NodeName != nodeName {
		t.Errorf("pod bound to %s, not to the node Karpenter launched for it (%s)", p.Spec.NodeName, nodeName)
	}
	e.deletePod(t, podName)
	e.emptyPool(t, pool)
	return tl
}
