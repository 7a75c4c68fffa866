//go:build e2e

package fleet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// kwokOnce starts the fleet's KWOK once for the package's tests.
var kwokOnce = sync.OnceValue(func() error {
	_, err := fleet.StartKWOK(cp)
	return err
})

// switchLog is the fleet's log, kept only as when each agent first said
// it is suspended (the switch's one log line).
type switchLog struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newSwitchLog() (*switchLog, io.Writer) {
	l := &switchLog{at: map[string]time.Time{}}
	r, w := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Node string }
			if json.Unmarshal(sc.Bytes(), &line) != nil || len(line.Msg) < 12 || line.Msg[:12] != "suspended by" {
				continue
			}
			l.mu.Lock()
			if _, ok := l.at[line.Node]; !ok {
				l.at[line.Node] = time.Now()
			}
			l.mu.Unlock()
		}
	}()
	return l, w
}

// since are the times from start to each agent's line, sorted.
func (l *switchLog) since(start time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, at := range l.at {
		out = append(out, at.Sub(start))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestSuspendDuringDNSOutage: the cluster DNS stops under a fleet of 200
// KWOK nodes, each with a simulated agent (the real agent code, the chart's
// RBAC), and the operator turns the suspend switch on at once. No node is
// re-tainted while every agent's checks keep failing past the re-taint
// threshold (each counts re-taints held as suspended); the time from the
// switch's write to every agent saying it is suspended is logged, a figure
// for docs/benchmarks.md, not asserted. After resume and DNS back, the
// fleet is verified.
func TestSuspendDuringDNSOutage(t *testing.T) {
	ctx := t.Context()
	if err := kwokOnce(); err != nil {
		t.Fatal(err)
	}
	nodes, err := fleet.CreateKWOKNodes(ctx, cp, "susp", smallFleet, 16)
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "type=kwok"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := fleet.WaitKWOKFleet(ctx, cp, smallFleet, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cp.PublishAgentPeers(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	said, logw := newSwitchLog()
	f := startFleet(t, nodes, fleet.Options{Args: smallFleetArgs, SharedListener: true, Log: logw})
	all := urls(f)
	waitVerified(t, smallFleet)
	harness.WaitCountersAt(t, all, iterations, 1, "a steady round", nil)

	watcher, err := fleet.WatchRetainted(ctx, cp.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Stop() })
	cms := cp.Client.CoreV1().ConfigMaps(harness.AgentNamespace)
	t.Cleanup(func() {
		if err := cms.Delete(context.Background(), api.SuspendConfigMap, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	if err := cp.StopDNS(); err != nil {
		t.Fatal(err)
	}
	dnsBack := false
	t.Cleanup(func() {
		if !dnsBack {
			_ = cp.StartDNS(context.Background())
		}
	})
	// The operator's switch, as kubectl node-ready suspend writes it,
	// before any agent can have failed --retaint-threshold rounds.
	start := time.Now()
	if _, err := cms.Create(ctx, suspend.ConfigMap(harness.AgentNamespace, api.SuspendConfigMap, "cluster DNS down", "e2e", start), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "every agent says it is suspended", func() (bool, string) {
		n := len(said.since(start))
		return n == smallFleet, fmt.Sprintf("%d of %d", n, smallFleet)
	})
	d := said.since(start)
	t.Logf("suspend written → every agent suspended: median %s, slowest %s (%d agents)", d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), len(d))
	for _, u := range all[:1] {
		if v, _ := harness.ScrapeMetric(u, "node_ready_suspended"); v != 1 {
			t.Errorf("node_ready_suspended = %v on %s while suspended, want 1", v, u)
		}
	}
	// Positive signal: at least as many agents as the fleet budget would
	// have re-tainted (TestKWOKFleet's outage) reached the threshold and had
	// their re-taint held by the switch, and the fleet kept failing after.
	// Not every agent: on a loaded machine the API server times out, and
	// rounds it could not serve do not count toward a re-taint.
	harness.Eventually(t, 2*time.Minute, "re-taints held by the switch on a budget's worth of agents", func() (bool, string) {
		agents := 0
		for _, u := range all {
			if v, _ := harness.ScrapeMetric(u, "node_ready_retaint_deferred_total", `reason="suspended"`); v > 0 {
				agents++
			}
		}
		return agents >= smallFleet/10, fmt.Sprintf("%d agents held", agents)
	})
	harness.WaitCountersAt(t, all, iterations, 3, "more failed rounds while suspended", nil)
	if n := watcher.Now(); n != 0 {
		t.Errorf("%d nodes re-tainted while suspended, want 0", n)
	}

	if err := cms.Delete(ctx, api.SuspendConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.StartDNS(ctx); err != nil {
		t.Fatal(err)
	}
	dnsBack = true
	waitVerified(t, smallFleet)
	most, _, err := watcher.Stop()
	if err != nil {
		t.Errorf("following the re-tainted nodes stopped early: %v", err)
	}
	// Between the resume and DNS back a few agents may re-taint, within the
	// budget; what matters is none while suspended (checked above).
	t.Logf("at most %d nodes re-tainted at once over the test (all after the resume)", most)
}
