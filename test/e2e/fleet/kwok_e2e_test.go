//go:build e2e

package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// smallFleet is the size of the fleet make test runs: large enough that the
// 10 % budget is more than one node, small enough for two shared cores.
const smallFleet = 200

// smallFleetArgs are short periods, so the outage plays out in seconds.
var smallFleetArgs = []string{"--check-period=3s", "--check-timeout=1s", "--initial-backoff=200ms"}

// maxReadsPerRound is what a healthy agent may read from the API server per
// round, on average over the fleet: the api check's read of its node (the
// floor), and a little for a watch the server ended with a relist. The
// EndpointSlices of kube-dns and of the peers come from watches. Watch
// requests themselves are not counted: a busy API server ends watches (its
// handler timeouts), and the agents opening them again is not per-round
// work; the benchmark reports every request.
const maxReadsPerRound = 1.1

// TestKWOKFleet runs a fleet of KWOK Nodes (Ready, heart-beating with
// Leases) with a simulated agent on each, and checks what the scale
// benchmarks measure at 10 000 nodes, as invariants: every node verified;
// while healthy, no agent writes, reads etcd or asks for more than
// maxReadsPerRound reads a round; while DNS is down everywhere, never
// more nodes re-tainted than the fleet budget (10 %) at any moment, and the
// fleet verified again once DNS is back.
func TestKWOKFleet(t *testing.T) {
	ctx := t.Context()
	if err := kwokOnce(); err != nil {
		t.Fatal(err)
	}
	nodes, err := fleet.CreateKWOKNodes(ctx, cp, "kwok", smallFleet, 16)
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
	// One listener for the fleet, as the benchmark runs it at 10 000 nodes;
	// every agent's own counters are read through it below.
	f := startFleet(t, nodes, fleet.Options{Args: smallFleetArgs, SharedListener: true})
	all := urls(f)
	waitVerified(t, smallFleet)
	harness.WaitCountersAt(t, all, iterations, 1, "a steady round", nil)

	t.Run("steady", func(t *testing.T) {
		offset, err := fleet.AuditOffset(cp.AuditLogPath())
		if err != nil {
			t.Fatal(err)
		}
		before := scrapeAll(t, all)
		harness.WaitCountersAt(t, all, iterations, 3, "the measured window", nil)
		after := scrapeAll(t, all)
		reqs, _, err := fleet.Requests(cp.AuditLogPath(), offset)
		if err != nil {
			t.Fatal(err)
		}
		var rounds, reads, watches float64
		for i := range after {
			rounds += after[i] - before[i]
		}
		for node, kinds := range reqs {
			for k, c := range kinds {
				switch k.Verb {
				case "get", "list":
					reads += float64(c)
				case "watch":
					watches += float64(c)
				}
				if k.Verb != "get" && k.Verb != "list" && k.Verb != "watch" {
					t.Errorf("healthy agent of %s wrote: %d × %s", node, c, k)
				}
				if (k.Verb == "get" || k.Verb == "list") && !k.Cached {
					t.Errorf("agent of %s read etcd: %d × %s", node, c, k)
				}
			}
		}
		perRound := reads / rounds
		t.Logf("%d agents: %.0f reads and %.0f watches in %.0f rounds: %.2f reads per agent per round", len(all), reads, watches, rounds, perRound)
		if perRound > maxReadsPerRound {
			t.Errorf("%.2f reads per agent per round, want at most %.2f", perRound, maxReadsPerRound)
		}
	})

	t.Run("dns outage within the budget", func(t *testing.T) {
		const budget = smallFleet / 10
		watcher, err := fleet.WatchRetainted(ctx, cp.Client)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { watcher.Stop() })
		if err := cp.StopDNS(); err != nil {
			t.Fatal(err)
		}
		dnsBack := false
		t.Cleanup(func() {
			if !dnsBack {
				_ = cp.StartDNS(context.Background())
			}
		})
		// Positive signals: the budget refused a re-taint somewhere, and the
		// budget was filled.
		harness.Eventually(t, 2*time.Minute, "the fleet budget used and refusing", func() (bool, string) {
			suppressed := 0.0
			for _, u := range all {
				v, _ := harness.ScrapeMetric(u, "node_ready_retaint_suppressed_total")
				suppressed += v
			}
			n := watcher.Now()
			return suppressed > 0 && n == budget, fmt.Sprintf("%d nodes re-tainted, %v refusals", n, suppressed)
		})
		// Every agent has kept failing for more rounds meanwhile.
		harness.WaitCountersAt(t, all, iterations, 3, "rounds with the budget used", nil)
		if err := cp.StartDNS(ctx); err != nil {
			t.Fatal(err)
		}
		dnsBack = true
		waitVerified(t, smallFleet)
		most, relists, err := watcher.Stop()
		if err != nil {
			t.Errorf("following the re-tainted nodes stopped early: %v", err)
		}
		t.Logf("at most %d nodes re-tainted at once (budget %d; the Node watch listed again %d times)", most, budget, relists)
		if most > budget {
			t.Errorf("%d nodes re-tainted at once, budget %d", most, budget)
		}
	})
}

// waitVerified waits until want nodes carry the verified label.
func waitVerified(t *testing.T, want int) {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, fmt.Sprintf("%d nodes verified", want), func() (bool, string) {
		list, err := cp.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: api.VerifiedLabel + "=true", ResourceVersion: "0"})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) >= want, fmt.Sprintf("%d verified", len(list.Items))
	})
}
