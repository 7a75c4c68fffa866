//go:build e2e

package fleet_test

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// matchArgs are short periods, so a few seconds hold many rounds.
var matchArgs = []string{"--check-period=1s", "--check-timeout=1s", "--initial-backoff=100ms"}

// matchRounds is how many rounds every agent runs in the measured window.
const matchRounds = 10

// TestSimulatedAgentRequestsMatchProcess runs five real agent processes and
// five simulated agents side by side, with the same flags, and compares what
// each kind of agent asks of the API server per round, by verb and resource,
// as the API server's audit log records it (each request attributed to its
// node by the node name the API server puts into a token bound to a pod).
func TestSimulatedAgentRequestsMatchProcess(t *testing.T) {
	const n = 5
	procNodes, simNodes := newNodes(t, "proc", n), newNodes(t, "sim", n)
	if err := cp.PublishAgentPeers(t.Context(), slices.Concat(procNodes, simNodes)...); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, node := range procNodes {
		all = append(all, cp.StartAgent(t, node, matchArgs...).URL("/metrics"))
	}
	all = append(all, urls(startFleet(t, simNodes, fleet.Options{Args: matchArgs}))...)
	harness.Eventually(t, 60*time.Second, "all ten nodes verified", func() (bool, string) {
		list, err := cp.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: api.VerifiedLabel + "=true"})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 2*n, fmt.Sprintf("%d verified", len(list.Items))
	})
	// One round after verification, so the window holds only steady rounds.
	harness.WaitCountersAt(t, all, iterations, 1, "a steady round", nil)

	offset, err := fleet.AuditOffset(cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	// Each agent's requests count between the answer to its first scrape
	// and the request of its second (as TestKWOKFleet counts them).
	before, _, from := scrapeBounded(t, all, iterations)
	harness.WaitCountersAt(t, all, iterations, matchRounds, "the measured window", nil)
	after, to, _ := scrapeBounded(t, all, iterations)
	nodes := slices.Concat(procNodes, simNodes)
	bounds := map[string]fleet.Window{}
	for i, node := range nodes {
		bounds[node.Name] = fleet.Window{From: from[i], To: to[i]}
	}
	reqs, err := fleet.RequestsWithin(cp.AuditLogPath(), offset, bounds)
	if err != nil {
		t.Fatal(err)
	}

	perRound := func(nodes []harness.Node, first int) map[string]float64 {
		out := map[string]float64{}
		for i, node := range nodes {
			rounds := after[first+i] - before[first+i]
			for k, c := range reqs[node.Name] {
				out[k.String()] += float64(c) / rounds / float64(len(nodes))
			}
		}
		return out
	}
	proc, sim := perRound(procNodes, 0), perRound(simNodes, n)
	union := maps.Clone(proc)
	maps.Copy(union, sim)
	kinds := slices.Sorted(maps.Keys(union))
	var table strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&table, "\n  %-40s process %.2f  simulated %.2f", k, proc[k], sim[k])
		// A window edge can split one round's requests: a tenth of a
		// request per round over ten rounds, for each agent.
		if math.Abs(proc[k]-sim[k]) > 0.25 {
			t.Errorf("%s: %.2f a round from a process, %.2f from a simulated agent", k, proc[k], sim[k])
		}
	}
	t.Logf("requests per agent per round, by kind (audit log):%s", table.String())
}

// scrape reads counter c from every URL.
func scrape(t *testing.T, urls []string, c harness.Counter) []float64 {
	t.Helper()
	values, _, _ := scrapeBounded(t, urls, c)
	return values
}
