//go:build e2e

package karpenter

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// holdNoRunaway is how long the no-runaway scenario watches a pool whose
// node never verifies (Karpenter's own chaos test bounds this the same way).
const holdNoRunaway = 5 * time.Minute

// neverVerifies are the flags of an agent that never verifies its node:
// its only check probes an address nothing listens on.
var neverVerifies = []string{"--checks=probe", "--check.probe.targets=tcp://" + unreachable}

// schedulingRounds counts Karpenter's scheduling simulations: the positive
// signal that it looked at the pending pods again and chose not to launch.
var schedulingRounds = "karpenter_scheduler_scheduling_duration_seconds_count"

// claimWatch follows a pool's NodeClaims poll by poll: every one ever seen,
// and the most alive (not being deleted) at once.
type claimWatch struct {
	e       *env
	pool    string
	seen    map[types.UID]time.Time
	gone    map[types.UID]time.Time
	maxLive int
}

func (e *env) watchClaims(pool string) *claimWatch {
	return &claimWatch{e: e, pool: pool, seen: map[types.UID]time.Time{}, gone: map[types.UID]time.Time{}}
}

// poll reads the pool's NodeClaims once and fails t if more are alive than
// need (the pending pods need).
func (w *claimWatch) poll(t *testing.T, need int) []unstructured.Unstructured {
	t.Helper()
	claims := w.e.claims(t, w.pool)
	now := time.Now()
	for _, c := range claims {
		if _, ok := w.seen[c.GetUID()]; !ok {
			w.seen[c.GetUID()] = now
		}
		if _, ok := w.gone[c.GetUID()]; !ok && c.GetDeletionTimestamp() != nil {
			w.gone[c.GetUID()] = now
		}
	}
	alive := live(claims)
	w.maxLive = max(w.maxLive, len(alive))
	if len(alive) > need {
		t.Fatalf("pool %s: %d NodeClaims alive for pending pods that need %d: %v", w.pool, len(alive), need, names(alive))
	}
	return alive
}

// waitTainted waits until a NodeClaim of the pool has launched a Node that
// registered with our startup taint, polling as poll does.
func (w *claimWatch) waitTainted(t *testing.T, need int) {
	t.Helper()
	harness.Eventually(t, time.Minute, "a NodeClaim launched and its Node registered with our taint", func() (bool, string) {
		alive := w.poll(t, need)
		if len(alive) == 0 {
			return false, "no NodeClaim yet"
		}
		n := w.e.node(t, claimProviderNode(alive[0]))
		if n == nil {
			return false, "no Node yet"
		}
		// Our taint: the seed key the runaway pool declares, or the default
		// preset's the keys pool's nodes are created with.
		ours := hasTaint(n, api.StartupTaintKey) || hasTaint(n, harness.StartupTaint.Key)
		return !hasTaint(n, "karpenter.sh/unregistered") && ours, "node not registered"
	})
}

// hold polls every second for d, as poll does.
func (w *claimWatch) hold(t *testing.T, d time.Duration, need int) {
	t.Helper()
	for start := time.Now(); time.Since(start) < d; {
		w.poll(t, need)
		time.Sleep(time.Second) // pacing of the poll
	}
	w.poll(t, need)
}

func names(claims []unstructured.Unstructured) []string {
	out := make([]string, len(claims))
	for i, c := range claims {
		out[i] = c.GetName()
	}
	return out
}

// karpenterRounds reads Karpenter's scheduling simulation count.
func (e *env) karpenterRounds(t *testing.T) float64 {
	t.Helper()
	v, err := e.karp.Metric(schedulingRounds)
	if err != nil {
		t.Fatalf("karpenter metrics: %v", err)
	}
	return v
}

// No runaway: three pending pods that fit one node; the pool's node keeps
// our startup taint for good (its agent's only check can never pass) and is
// protected from remediation. For five minutes, at every poll, at most one
// NodeClaim is alive and no second one is ever created, while Karpenter
// keeps simulating the pending pods (its scheduling count grows) and the
// webhook keeps scanning.
func (e *env) testNoRunaway(t *testing.T) {
	const pool = "runaway"
	e.pool(t, pool, harness.NodePoolOptions{
		StartupTaints: []corev1.Taint{ourTaint},
		Annotations:   map[string]string{"infra.894.io/protect": "true"},
	}, neverVerifies)
	for i := range 3 {
		e.pendingPod(t, fmt.Sprintf("runaway-%d", i), pool)
	}
	w := e.watchClaims(pool)
	w.waitTainted(t, 1)
	rounds, scans := e.karpenterRounds(t), e.w.Metric(t, "node_remediation_scans_total", `result="ok"`)
	w.hold(t, holdNoRunaway, 1)
	w.poll(t, 1)
	grown := e.karpenterRounds(t) - rounds
	scanned := e.w.Metric(t, "node_remediation_scans_total", `result="ok"`) - scans
	if grown < 5 {
		t.Fatalf("Karpenter simulated the pending pods %v times in %s: too few to show it chose not to launch", grown, holdNoRunaway)
	}
	if len(w.seen) != 1 {
		t.Errorf("pool %s: %d NodeClaims created for pods one node holds, want 1", pool, len(w.seen))
	}
	for i := range 3 {
		if p := e.pod(t, fmt.Sprintf("runaway-%d", i)); p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s, which never verified", p.Name, p.Spec.NodeName)
		}
	}
	t.Logf("figure: no runaway: %d NodeClaim in %s for 3 pending pods on a node that never verifies (Karpenter simulated them %v times, the webhook scanned %v times)",
		len(w.seen), holdNoRunaway, grown, scanned)
}
