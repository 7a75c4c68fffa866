//go:build e2e

package cleanup

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ipOutage     = "10.213.0.23"      // the webhook cut off from the API server
	proxyOutage  = "10.213.0.24:6443" // its way to the API server (which holds :443 on every address)
	pxOutageAddr = "10.213.0.32:9001"
)

// An API server that goes away between the plugins' success and the
// finalizer removal: the node must stay (finalizer kept) while it is gone,
// the process must survive losing its Lease, and the cleanup must finish on
// its own once the API server is back, without decommissioning twice.
func TestCleanupResumesAfterAPIServerOutage(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := &env{cp: cp, dir: cp.Dir}
	e.px, e.configPath = servePortworx(t, e.dir, pxOutageAddr, "120s")

	saKubeconfig := webhookIdentity(t, cp)
	// The webhook's own identity, through a proxy the test can cut; the test
	// itself talks to the API server directly.
	proxy := harness.StartProxy(t, proxyOutage, net.JoinHostPort(harness.APIServerIP, "443"))
	kubeconfig := harness.KubeconfigVia(t, saKubeconfig, proxyOutage, filepath.Join(e.dir, "webhook-via-proxy.kubeconfig"))
	w := cp.StartWebhook(t, "webhook-outage", ipOutage,
		"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name=webhook-outage",
		"--webhook-config-name=", "--extra-sans="+ipOutage,
		"--config="+e.configPath,
		"--cleanup-retry-base=200ms", "--cleanup-retry-max=2s",
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
		"--log-level=debug")
	w.WaitReady(t, 30*time.Second)
	e.procs = []*harness.Daemon{w}
	e.leader(t)

	const name = "outage-1"
	e.px.set(name, pxHang)
	cp.KubectlT(t, harness.NodeYAML(name, nil, fin), "create", "-f", "-")
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitArrived(t, e.px, name)

	// Portworx decommissions the node while the API server is unreachable:
	// every plugin succeeded, only the finalizer removal is left, and it fails.
	proxy.Cut()
	close(e.px.release)
	harness.WaitFor(t, 30*time.Second, "a failed finalizer removal in the log", func() bool {
		return logLine(w.LogT(t), `"msg":"cleanup done but the finalizer could not be removed; retrying"`, `"node":"`+name+`"`) >= 0
	})
	// Cut off past its renew deadline, the replica stops working without the Lease.
	harness.WaitFor(t, 30*time.Second, "node_cleanup_leader 0 while the API server is unreachable", func() bool {
		v, err := w.TryMetric("node_cleanup_leader")
		return err == nil && v == 0
	})
	// Standing for election again, it keeps trying the Lease (client-go's
	// "Error retrieving lease lock" each retry period): two more tries, alive.
	tries := strings.Count(w.LogT(t), "Error retrieving lease lock")
	harness.Eventually(t, 20*time.Second, "two more tries of the Lease while cut off", func() (bool, string) {
		if exited, _ := w.Exited(); exited {
			t.Fatalf("webhook exited while the API server was unreachable: %v", w.ExitError())
		}
		got := strings.Count(w.LogT(t), "Error retrieving lease lock")
		return got >= tries+2, fmt.Sprintf("%d tries logged, from %d", got, tries)
	})
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || n.DeletionTimestamp == nil || !slices.Contains(n.Finalizers, fin) {
		t.Fatalf("node %s while the API server was unreachable: %v, want it terminating with %s", name, err, fin)
	}
	runsDuringOutage := e.px.enumerated()

	proxy.Restore(t)
	e.waitGone(t, name, 60*time.Second)
	if got := w.Metric(t, "node_cleanup_leader"); got != 1 {
		t.Errorf("node_cleanup_leader = %v after the API server came back", got)
	}
	// Plugins are re-run on the retries (that is why they must be
	// idempotent); Portworx, which no longer knows the node, is not asked
	// to remove it again.
	calls := e.px.callsFor(name)
	if len(calls) != 1 || calls[0].status != 200 {
		t.Errorf("portworx removals of %s = %+v, want exactly one, answered 200", name, calls)
	}
	if e.px.enumerated() <= runsDuringOutage {
		t.Errorf("portworx enumerated %d times, %d before the API server came back: the pipeline did not run again", e.px.enumerated(), runsDuringOutage)
	}
	e.waitEvent(t, name, api.EventCleanupCompleted, "portworx=success")
	log := w.LogT(t)
	if logLine(log, `"msg":"node not in the portworx cluster; nothing to decommission"`, `"node":"`+name+`"`) < 0 {
		t.Errorf("no re-run of the portworx plugin that found the node already decommissioned")
	}
	if strings.Contains(strings.ToLower(log), "panic") {
		t.Errorf("webhook log mentions a panic:\n%s", w.Tail(60))
	}
	if exited, _ := w.Exited(); exited {
		t.Fatalf("webhook exited: %v", w.ExitError())
	}
}
