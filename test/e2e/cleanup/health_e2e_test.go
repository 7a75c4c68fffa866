//go:build e2e

package cleanup

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ipHealth     = "10.213.0.26"
	healthyAddr  = "10.213.0.36:8080"
	healthPeriod = 500 * time.Millisecond
)

// flakyReceiver is a hook receiver whose health probe (/healthz answers 503)
// and POSTs (answered 500) fail on their own switches; it counts both.
type flakyReceiver struct {
	mu                    sync.Mutex
	probeDown, postFails  bool
	posts, probes, failed int
}

func (f *flakyReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/healthz" {
		f.probes++
		if f.probeDown {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return
	}
	f.posts++
	if f.postFails {
		f.failed++
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// set switches the probe's and the POSTs' failures.
func (f *flakyReceiver) set(probeDown, postFails bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probeDown, f.postFails = probeDown, postFails
}

func (f *flakyReceiver) state() (posts, probes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts, f.probes
}

// checkedHookConfig writes a webhook configuration whose only plugin is a
// critical hook at addr, with its health probe and no retries.
func checkedHookConfig(t *testing.T, dir, addr string) string {
	t.Helper()
	return writeFile(t, dir, "config.yaml", fmt.Sprintf(`plugins:
  hook:
    critical: true
    url: http://%[1]s/api/nodes
    healthURL: http://%[1]s/healthz
    retries: 0
`, addr))
}

// TestPluginHealth: the hook plugin's health probe (its healthURL) runs
// every --plugin-health-interval and before a cleanup starts. While it
// fails: the metric says 0, one Warning Event on the webhook's Pod, the
// readiness is untouched, and a deleted node's cleanup does not call the
// plugin at all (its status says why) but keeps the node. Once it passes:
// a Normal Event, and the node is cleaned up and goes.
func TestPluginHealth(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	rcv := &flakyReceiver{probeDown: true, postFails: true}
	harness.ServeHTTP(t, healthyAddr, rcv)
	config := checkedHookConfig(t, cp.Dir, healthyAddr)
	const pod = "webhook-health"
	w := startReplica(t, cp, pod, ipHealth, config,
		"--plugin-health-interval="+healthPeriod.String(),
		"--cleanup-retry-base=300ms", "--cleanup-retry-max=1s", "--log-level=debug")
	e := &env{cp: cp, dir: cp.Dir, procs: []*harness.Daemon{w}}
	e.leader(t)

	harness.WaitFor(t, 20*time.Second, "node_cleanup_plugin_healthy{plugin=hook} 0", func() bool {
		v, err := w.TryMetric("node_cleanup_plugin_healthy", `plugin="hook"`)
		return err == nil && v == 0
	})
	podEvents := func(reason string) []string { return cp.EventNotes(t, "Pod", pod, reason) }
	harness.WaitFor(t, 20*time.Second, "a CleanupPluginUnhealthy Event on the webhook's Pod", func() bool {
		return slices.ContainsFunc(podEvents(api.EventCleanupPluginUnhealthy), func(n string) bool {
			return strings.Contains(n, "cleanup plugin hook: health probe failed: ") && strings.Contains(n, "answered HTTP 503")
		})
	})
	// Readiness is not the plugins' business.
	resp, err := http.Get(w.URL("/readyz"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %d while a plugin is unhealthy, want 200", resp.StatusCode)
	}

	const name = "health-1"
	e.createNode(t, name)
	statuses := watchStatus(t, cp, name)
	cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
	harness.WaitFor(t, 20*time.Second, "a status saying the hook is not run while unhealthy", func() bool {
		return slices.ContainsFunc(statuses(), func(s string) bool { return strings.Contains(s, `"hook":"failed: health probe failed: `) })
	})
	// Several more attempts that left the hook out, the node kept and
	// nothing POSTed all along.
	unhealthySkips := harness.Counter{Name: "node_cleanup_operations_total", Match: []string{`plugin="hook"`, `result="unhealthy"`}}
	w.WaitCounter(t, unhealthySkips, 3, "attempts while the hook is unhealthy", func() (bool, string) {
		if posts, _ := rcv.state(); posts != 0 {
			return false, fmt.Sprintf("%d documents POSTed while the hook's probe failed, want 0", posts)
		}
		if got, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{}); err != nil || !slices.Contains(got.Finalizers, fin) {
			return false, fmt.Sprintf("node %s while the critical hook is unhealthy: %v, want it kept", name, err)
		}
		return true, ""
	})
	harness.WaitFor(t, 5*time.Second, fmt.Sprintf("4 health probes in about 5 s at a %s interval", healthPeriod), func() bool {
		_, probes := rcv.state()
		return probes >= 4
	})
	if n := len(podEvents(api.EventCleanupPluginUnhealthy)); n != 1 {
		t.Errorf("%d CleanupPluginUnhealthy Events, want 1 (one per change, not per probe)", n)
	}

	rcv.set(false, false)
	e.waitGone(t, name, 30*time.Second)
	harness.WaitFor(t, 20*time.Second, "a CleanupPluginHealthy Event", func() bool { return len(podEvents(api.EventCleanupPluginHealthy)) == 1 })
	if v := w.Metric(t, "node_cleanup_plugin_healthy", `plugin="hook"`); v != 1 {
		t.Errorf("node_cleanup_plugin_healthy{hook} = %v after recovery, want 1", v)
	}
	if posts, _ := rcv.state(); posts != 1 {
		t.Errorf("%d documents POSTed after recovery, want 1", posts)
	}
	if v := w.Metric(t, "node_cleanup_operations_total", `plugin="hook"`, `result="unhealthy"`); v < 1 {
		t.Errorf("node_cleanup_operations_total{hook,unhealthy} = %v, want the attempts that did not run it", v)
	}
}
