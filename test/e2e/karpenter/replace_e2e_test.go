//go:build e2e

package karpenter

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// Replace: the replace pool's node never verifies (no agent runs there);
// the replacer deletes its NodeClaim at the deadline and Karpenter launches
// the next one for the pod still pending, one at a time (never two alive);
// when breakerOpensAt new nodes have gone past the deadline the circuit
// breaker opens (RemediationPaused Event, node_remediation_circuit_open 1)
// and the last node is kept, while the replacer keeps scanning and nothing
// more is launched.
func (e *env) testReplace(t *testing.T) {
	const pool = "replace"
	e.pool(t, pool, harness.NodePoolOptions{StartupTaints: []corev1.Taint{replaceTaint}}, nil)
	e.pendingPod(t, "replace-0", pool)
	w := e.watchClaims(pool)
	harness.Eventually(t, time.Duration(breakerOpensAt+1)*(replaceDeadline+30*time.Second), "the circuit breaker open", func() (bool, string) {
		w.poll(t, 1)
		open := e.wb.Metric(t, "node_remediation_circuit_open")
		return open == 1, ""
	})
	alive := w.poll(t, 1)
	if len(w.seen) != breakerOpensAt || len(w.gone) != breakerOpensAt-1 || len(alive) != 1 {
		t.Fatalf("when the breaker opened: %d NodeClaims created, %d deleted, %d alive; want %d, %d, 1",
			len(w.seen), len(w.gone), len(alive), breakerOpensAt, breakerOpensAt-1)
	}
	// Launch and registration take a few seconds before the deadline starts.
	for uid, gone := range w.gone {
		if lived := gone.Sub(w.seen[uid]); lived > replaceDeadline+20*time.Second {
			t.Errorf("a NodeClaim was deleted %s after its creation: not within --unverified-deadline=%s", r(lived), replaceDeadline)
		}
	}
	kept := claimProviderNode(alive[0])
	e.cp.WaitEvent(t, 10*time.Second, "Node", kept, api.EventRemediationPaused, "")
	// Open, it stays open: ten more scans, and no NodeClaim deleted or made.
	e.wb.WaitCounter(t, harness.Counter{Name: "node_remediation_scans_total", Match: []string{`result="ok"`}}, 10,
		"scans with the breaker open", func() (bool, string) {
			w.poll(t, 1)
			return len(w.seen) == breakerOpensAt && len(w.gone) == breakerOpensAt-1, "a NodeClaim was deleted or launched with the breaker open"
		})
	if got := e.wb.Metric(t, "node_remediation_actions_total", `action="delete_nodeclaim"`, `result="success"`); got != breakerOpensAt-1 {
		t.Errorf("replace actions = %v, want %d", got, breakerOpensAt-1)
	}
	t.Logf("figure: replace: %s", w.lifetimes())
}

// lifetimes says, claim by claim in the order they were created, how long
// each lived until its deletion began, and how soon the next followed.
func (w *claimWatch) lifetimes() string {
	uids := make([]types.UID, 0, len(w.seen))
	for uid := range w.seen {
		uids = append(uids, uid)
	}
	slices.SortFunc(uids, func(a, b types.UID) int { return w.seen[a].Compare(w.seen[b]) })
	var out string
	for i, uid := range uids {
		gone, ok := w.gone[uid]
		if !ok {
			out += "kept"
			break
		}
		out += "deleted " + r(gone.Sub(w.seen[uid])).String() + " after its creation"
		if i+1 < len(uids) {
			out += ", next created " + r(w.seen[uids[i+1]].Sub(gone)).String() + " later; "
		}
	}
	return out
}
