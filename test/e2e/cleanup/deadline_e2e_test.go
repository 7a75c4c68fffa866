//go:build e2e

package cleanup

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ipDeadline     = "10.213.0.23"
	pxDeadlineAddr = "10.213.0.32:9001"
)

// TestCleanupDeadline: with --cleanup-deadline a critical plugin that keeps
// failing holds a deleted node only until the deadline, even when the next
// retry of its backoff would come later; then the finalizer comes off with a
// Warning Event naming what failed, and a metric.
func TestCleanupDeadline(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	px := &portworx{behaviour: map[string]pxBehaviour{}, arrived: make(chan string, 16), release: make(chan struct{}), token: "px-token"}
	serve(t, pxDeadlineAddr, px)
	token := writeFile(t, cp.Dir, "px-token", "px-token\n")
	config := writeFile(t, cp.Dir, "config.yaml", fmt.Sprintf(`plugins:
  portworx:
    critical: true
    endpoint: http://%s
    tokenFile: %s
`, pxDeadlineAddr, token))
	const deadline = 5 * time.Second
	w := cp.StartWebhook(t, "webhook-deadline", ipDeadline,
		"--kubeconfig="+webhookIdentity(t, cp), "--namespace="+ns, "--pod-name=webhook-deadline",
		"--webhook-config-name=", "--extra-sans="+ipDeadline, "--config="+config,
		// The backoff (1, 2, 4 s, ...) would retry 3 s and then 7 s after
		// the deletion: the deadline at 5 s must not wait for the second.
		"--cleanup-retry-base=1s", "--cleanup-retry-max=30s", "--cleanup-deadline="+deadline.String(),
		"--log-level=debug")
	w.WaitReady(t, 30*time.Second)
	e := &env{cp: cp, dir: cp.Dir, px: px, procs: []*harness.Daemon{w}}
	e.leader(t)

	const name = "deadline-1"
	px.set(name, pxFail)
	e.createNode(t, name) // back-filled: no admission webhook here
	start := time.Now()
	cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
	e.waitGone(t, name, 30*time.Second)
	took := time.Since(start)
	if took < deadline-time.Second || took > deadline+1500*time.Millisecond {
		t.Errorf("node gone %s after deletion, want about the %s deadline", took.Round(100*time.Millisecond), deadline)
	}
	e.waitEvent(t, name, "CleanupDeadlineExceeded", "finalizer removed although critical plugins failed: portworx")
	if got := w.Metric(t, "node_cleanup_nodes_total", `result="deadline_exceeded"`); got != 1 {
		t.Errorf("node_cleanup_nodes_total{result=deadline_exceeded} = %v, want 1", got)
	}
	calls := px.callsFor(name)
	if len(calls) < 3 {
		t.Errorf("%d portworx calls before the deadline, want the retries of the backoff", len(calls))
	}
	for _, c := range calls {
		if c.status != http.StatusInternalServerError {
			t.Errorf("portworx call answered %d; the plugin was to fail throughout", c.status)
		}
	}
}
