//go:build e2e

package cleanup

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	e.waitEvent(t, name, "CleanupDeadlineExceeded", "finalizer removed although critical plugins failed: portworx")
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
	ipAfterOutage   = "10.213.0.27"
	hookOutageAddr  = "10.213.0.37:8080"
	outageDeadline  = 2 * time.Second
	outageMinTries  = 3 // --cleanup-deadline-min-attempts, by default
	unhealthyProofs = 4
)

// TestCleanupDeadlineCountsRealAttempts: a node deleted while the webhook
// was down for longer than --cleanup-deadline is not released by the first
// failed attempt once the webhook is back. Attempts that left the critical
// plugin out because its health probe failed do not count at all; the
// finalizer comes off only after --cleanup-deadline-min-attempts attempts
// that called it, with an Event that says so.
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
		"--plugin-health-interval=200ms", "--cleanup-retry-base=200ms", "--cleanup-retry-max=400ms",
		"--cleanup-deadline="+outageDeadline.String(),
		"--log-level=debug")
	w.WaitReady(t, 30*time.Second)
	e := &env{cp: cp, dir: cp.Dir, procs: []*harness.Daemon{w}}
	e.leader(t)

	// Attempts that did not call the hook, past the deadline: the node stays.
	harness.Eventually(t, 30*time.Second, "attempts that left the unhealthy hook out", func() (bool, string) {
		v, err := w.TryMetric("node_cleanup_operations_total", `plugin="hook"`, `result="unhealthy"`)
		if n, gerr := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{}); gerr != nil || !slices.Contains(n.Finalizers, fin) {
			t.Fatalf("node %s released after %v attempts that never called the critical hook (deleted %s ago, deadline %s): %v",
				name, v, time.Since(deleted).Round(100*time.Millisecond), outageDeadline, gerr)
		}
		return err == nil && v >= unhealthyProofs, fmt.Sprintf("unhealthy skips %v, err %v", v, err)
	})
	if got := rcv.failedPosts(); got != 0 {
		t.Fatalf("%d documents POSTed while the hook's probe failed", got)
	}

	// The receiver answers its probe but refuses documents: each attempt now
	// counts, and the node goes after the minimum.
	rcv.set(false, true)
	harness.WaitFor(t, 60*time.Second, "node "+name+" released after failed attempts that called the hook", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && !slices.Contains(n.Finalizers, fin) {
			return true
		}
		if got := rcv.failedPosts(); got > outageMinTries {
			t.Fatalf("node %s still held after %d failed attempts that called the hook, want released after %d", name, got, outageMinTries)
		}
		return false
	})
	if got := rcv.failedPosts(); got < outageMinTries {
		t.Errorf("node %s released after %d attempts that called the hook, want %d", name, got, outageMinTries)
	}
	e.waitEvent(t, name, "CleanupDeadlineExceeded", fmt.Sprintf("passed after %d attempts that ran the critical plugins", outageMinTries))
}
