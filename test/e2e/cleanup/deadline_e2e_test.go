//go:build e2e

package cleanup

import (
	"net/http"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ipDeadline     = "10.213.0.23"
	pxDeadlineAddr = "10.213.0.32:9001"
)

// TestCleanupDeadline: with --cleanup-deadline a critical plugin that keeps
// failing holds a deleted node only until the deadline; then the finalizer
// comes off, through the API server under the chart's RBAC and node policy,
// with a Warning Event naming what failed, and a metric. The timing
// (backoff, the deadline before the next retry, the minimum attempts) is
// proven on a fake clock: internal/webhook/nodecleanup
// TestCleanupTimingOnTheClock.
func TestCleanupDeadline(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	px, config := servePortworx(t, cp.Dir, pxDeadlineAddr, "")
	const deadline = 2 * time.Second
	w := startReplica(t, cp, "webhook-deadline", ipDeadline, config,
		// Attempts 0 and 1 s after the deletion, then the deadline's at 2 s
		// (the backoff's next retry would come at 3 s).
		"--cleanup-retry-base=1s", "--cleanup-retry-max=30s", "--cleanup-deadline="+deadline.String(),
		"--log-level=debug")
	e := &env{cp: cp, dir: cp.Dir, px: px, procs: []*harness.Daemon{w}}
	e.leader(t)

	const name = "deadline-1"
	px.set(name, pxFail)
	e.createNode(t, name) // back-filled: no admission webhook here
	cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
	e.waitGone(t, name, 30*time.Second)
	e.waitEvent(t, name, api.EventCleanupDeadlineExceeded, "finalizer removed although critical plugins failed: portworx")
	if got := w.Metric(t, "node_cleanup_nodes_total", `result="deadline_exceeded"`); got != 1 {
		t.Errorf("node_cleanup_nodes_total{result=deadline_exceeded} = %v, want 1", got)
	}
	// The deadline releases the node only after --cleanup-deadline-min-attempts
	// (3) failed attempts that called portworx. Count them where the webhook
	// does: under load an attempt can fail at its enumerate call, before
	// the DELETE this receiver records.
	failed := w.Metric(t, "node_cleanup_operations_total", `plugin="portworx"`, `result="failure"`) +
		w.Metric(t, "node_cleanup_operations_total", `plugin="portworx"`, `result="timeout"`)
	if failed < 3 {
		t.Errorf("%v failed portworx attempts before the deadline released the node, want at least 3", failed)
	}
	calls := px.callsFor(name)
	if len(calls) == 0 {
		t.Error("no portworx DELETE before the deadline: the plugin never reached the receiver")
	}
	for _, c := range calls {
		if c.status != http.StatusInternalServerError {
			t.Errorf("portworx call answered %d; the plugin was to fail throughout", c.status)
		}
	}
}
