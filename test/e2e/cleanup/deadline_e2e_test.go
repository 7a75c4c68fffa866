//go:build e2e

package cleanup

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
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
	px, config := servePortworx(t, cp.Dir, pxDeadlineAddr, "")
	const deadline = 5 * time.Second
	w := startReplica(t, cp, "webhook-deadline", ipDeadline, config,
		// The backoff (1, 2, 4 s, ...) would retry 3 s and then 7 s after
		// the deletion: the deadline at 5 s must not wait for the second.
		"--cleanup-retry-base=1s", "--cleanup-retry-max=30s", "--cleanup-deadline="+deadline.String(),
		"--log-level=debug")
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

const (
	ipAfterOutage  = "10.213.0.27"
	hookOutageAddr = "10.213.0.37:8080"
	outageDeadline = 2 * time.Second
	outageMinTries = 3 // --cleanup-deadline-min-attempts, by default
)

// TestCleanupDeadlineCountsRealAttempts: a node deleted while the webhook
// was down for longer than --cleanup-deadline is not released by the first
// failed attempt once the webhook is back, but only after
// --cleanup-deadline-min-attempts attempts that each asked the receiver
// something of its own. The receiver's probe fails throughout, so each
// attempt leaves the critical hook out on a health probe newer than the
// node's previous attempt (the periodic probe is an hour apart here: the
// attempts probe for themselves), with an Event that says so; nothing is
// ever POSTed.
func TestCleanupDeadlineCountsRealAttempts(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	rcv := &flakyReceiver{probeDown: true, postFails: true}
	harness.ServeHTTP(t, hookOutageAddr, rcv)
	config := checkedHookConfig(t, cp.Dir, hookOutageAddr)
	kubeconfig := webhookIdentity(t, cp)

	// The outage: the node is deleted while no webhook runs, and stays
	// deleted for longer than the deadline.
	const name = "outage-deadline-1"
	if _, err := cp.Client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{fin}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
	deleted := time.Now()
	cp.WaitNode(t, name, 10*time.Second, "deletionTimestamp set", func(n *corev1.Node) bool { return n.DeletionTimestamp != nil })
	// Setup, not an assertion: the outage outlasts the deadline.
	time.Sleep(outageDeadline + time.Second - time.Since(deleted))

	w := cp.StartWebhook(t, "webhook-after-outage", ipAfterOutage,
		"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name=webhook-after-outage",
		"--webhook-config-name=", "--extra-sans="+ipAfterOutage, "--config="+config,
		"--plugin-health-interval=1h", "--cleanup-retry-base=200ms", "--cleanup-retry-max=400ms",
		"--cleanup-deadline="+outageDeadline.String(),
		"--log-level=debug")
	w.WaitReady(t, 30*time.Second)
	e := &env{cp: cp, dir: cp.Dir, procs: []*harness.Daemon{w}}
	e.leader(t)

	e.waitGone(t, name, 30*time.Second)
	e.waitEvent(t, name, api.EventCleanupDeadlineExceeded, fmt.Sprintf("passed after %d attempts that called or probed the critical plugins", outageMinTries))
	// The first attempts past the deadline kept the node: the webhook's own
	// account of each attempt, in order.
	log := w.LogT(t)
	if got := countLines(log, `"msg":"node cleanup failed; finalizer kept"`, `"node":"`+name+`"`); got != outageMinTries-1 {
		t.Errorf("%d failed attempts kept %s before the deadline released it, want %d", got, name, outageMinTries-1)
	}
	if countLines(log, `"msg":"cleanup deadline passed with critical plugins failing; finalizer removed anyway"`, `"node":"`+name+`"`, fmt.Sprintf(`"tried":%d`, outageMinTries)) != 1 {
		t.Errorf("no log line releasing %s after %d attempts", name, outageMinTries)
	}
	if got := w.Metric(t, "node_cleanup_operations_total", `plugin="hook"`, `result="unhealthy"`); got != outageMinTries {
		t.Errorf("node_cleanup_operations_total{hook,unhealthy} = %v, want %d", got, outageMinTries)
	}
	// A probe of its own for each attempt after the first (which may use
	// the one the replica made at start).
	posts, probes := rcv.state()
	if probes < outageMinTries {
		t.Errorf("%d health probes for %d counted attempts, want one each", probes, outageMinTries)
	}
	if posts != 0 {
		t.Errorf("%d documents POSTed while the hook's probe failed, want 0", posts)
	}
}

const (
	ipUnhealthyDeadline = "10.213.0.43"
	hookUnhealthyAddr   = "10.213.0.44:8080"
)

// TestCleanupDeadlineWithAnUnhealthyHook (issue 35): with
// --cleanup-deadline=5s and a critical hook whose health probe fails, the
// attempts that leave the hook out as unhealthy count toward the
// deadline's minimum attempts (each on a probe of its own), so the deleted
// node is released within 2 s after the deadline with
// CleanupDeadlineExceeded, the hook never called. Before, those attempts
// counted for nothing and the node was held for as long as the receiver
// stayed down.
func TestCleanupDeadlineWithAnUnhealthyHook(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	rcv := &flakyReceiver{probeDown: true, postFails: true}
	harness.ServeHTTP(t, hookUnhealthyAddr, rcv)
	config := checkedHookConfig(t, cp.Dir, hookUnhealthyAddr)
	const deadline = 5 * time.Second
	w := startReplica(t, cp, "webhook-unhealthy-deadline", ipUnhealthyDeadline, config,
		// The chart's probe interval; retries 1, 2, 4 s apart: three attempts
		// before the deadline, and one at it.
		"--plugin-health-interval=1m", "--cleanup-retry-base=1s", "--cleanup-retry-max=30s",
		"--cleanup-deadline="+deadline.String(), "--log-level=debug")
	e := &env{cp: cp, dir: cp.Dir, procs: []*harness.Daemon{w}}
	e.leader(t)
	harness.WaitFor(t, 20*time.Second, "node_cleanup_plugin_healthy{plugin=hook} 0", func() bool {
		v, err := w.TryMetric("node_cleanup_plugin_healthy", `plugin="hook"`)
		return err == nil && v == 0
	})

	const name = "unhealthy-deadline-1"
	e.createNode(t, name)
	start := time.Now()
	cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
	// The bound: the deadline (the deletionTimestamp has whole seconds, so
	// up to 1 s less), plus one attempt: a probe answered at once.
	const bound = deadline + 2*time.Second
	harness.WaitFor(t, bound+10*time.Second, "node "+name+" released", func() bool {
		_, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	took := time.Since(start)
	if took < deadline-time.Second || took > bound {
		t.Errorf("node gone %s after deletion, want within %s (deadline %s)", took.Round(100*time.Millisecond), bound, deadline)
	}
	e.waitEvent(t, name, api.EventCleanupDeadlineExceeded, "attempts that called or probed the critical plugins; finalizer removed although critical plugins failed: hook: health probe failed")
	if got := w.Metric(t, "node_cleanup_nodes_total", `result="deadline_exceeded"`); got != 1 {
		t.Errorf("node_cleanup_nodes_total{result=deadline_exceeded} = %v, want 1", got)
	}
	unhealthy := w.Metric(t, "node_cleanup_operations_total", `plugin="hook"`, `result="unhealthy"`)
	if unhealthy < 3 {
		t.Errorf("%v attempts left the hook out, want at least --cleanup-deadline-min-attempts (3)", unhealthy)
	}
	posts, probes := rcv.state()
	if posts != 0 {
		t.Errorf("%d documents POSTed while the hook's probe failed, want 0", posts)
	}
	if float64(probes) < unhealthy {
		t.Errorf("%d health probes for %v attempts that left the hook out, want one each", probes, unhealthy)
	}
}

// countLines counts the lines of log holding every part.
func countLines(log string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			n++
		}
	}
	return n
}
