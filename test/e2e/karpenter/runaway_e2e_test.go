//go:build e2e

package karpenter

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// The no-runaway scenarios watch a pool whose node never verifies until
// Karpenter has simulated the pending pods runawayKarpenterRounds more times
// and the node's agent has run runawayAgentRounds more rounds: counts, not
// a duration, so a loaded machine cannot end the watch before Karpenter had
// its chances. Where our key is not declared (the keys scenario) Karpenter
// launched a second NodeClaim within a few of its rounds (one every 10 s, a
// simulation every 3 s or so): 30 leave it ten times that.
const (
	runawayKarpenterRounds = 30
	runawayAgentRounds     = 10
	// roundsLimit bounds the wait for those rounds: only a stuck Karpenter
	// or agent reaches it (30 rounds took about 90 s).
	roundsLimit = 10 * time.Minute
)

// runawayAgentPeriod paces the never-verifying agents of those scenarios so
// that their rounds come within Karpenter's (the default period is 60 s).
var runawayAgentPeriod = "--check-period=5s"

// neverVerifies are the flags of an agent that never verifies its node:
// its only check probes an address nothing listens on.
var neverVerifies = []string{"--checks=probe", "--check.probe.targets=tcp://" + unreachable}

// schedulingRounds counts Karpenter's scheduling simulations: the positive
// signal that it looked at the pending pods again and chose not to launch.
var schedulingRounds = "karpenter_scheduler_scheduling_duration_seconds_count"

// claimWatch follows a pool's NodeClaims poll by poll: every one ever seen,
// and the most alive (not being deleted) at once.
type claimWatch struct {
	e       *env
	pool    string
	seen    map[types.UID]time.Time
	gone    map[types.UID]time.Time
	maxLive int
}

func (e *env) watchClaims(pool string) *claimWatch {
	return &claimWatch{e: e, pool: pool, seen: map[types.UID]time.Time{}, gone: map[types.UID]time.Time{}}
}

// poll reads the pool's NodeClaims once and fails t if more are alive than
// need (the pending pods need).
func (w *claimWatch) poll(t *testing.T, need int) []unstructured.Unstructured {
	t.Helper()
	claims := w.e.claims(t, w.pool)
	now := time.Now()
	for _, c := range claims {
		if _, ok := w.seen[c.GetUID()]; !ok {
			w.seen[c.GetUID()] = now
		}
		if _, ok := w.gone[c.GetUID()]; !ok && c.GetDeletionTimestamp() != nil {
			w.gone[c.GetUID()] = now
		}
	}
	alive := live(claims)
	w.maxLive = max(w.maxLive, len(alive))
	if len(alive) > need {
		t.Fatalf("pool %s: %d NodeClaims alive for pending pods that need %d: %v", w.pool, len(alive), need, names(alive))
	}
	return alive
}

// waitTainted waits until a NodeClaim of the pool has launched a Node that
// registered with our startup taint, polling as poll does, and returns the
// Node's name.
func (w *claimWatch) waitTainted(t *testing.T, need int) string {
	t.Helper()
	var node string
	harness.Eventually(t, time.Minute, "a NodeClaim launched and its Node registered with our taint", func() (bool, string) {
		alive := w.poll(t, need)
		if len(alive) == 0 {
			return false, "no NodeClaim yet"
		}
		node = claimProviderNode(alive[0])
		n := w.e.node(t, node)
		if n == nil {
			return false, "no Node yet"
		}
		// Our taint: the seed key the runaway pool declares, or the default
		// preset's the keys pool's nodes are created with.
		ours := hasTaint(n, api.StartupTaintKey) || hasTaint(n, harness.StartupTaint.Key)
		return !hasTaint(n, "karpenter.sh/unregistered") && ours, "node not registered"
	})
	return node
}

// holdRounds polls every second, as poll does, until Karpenter has run
// runawayKarpenterRounds more scheduling simulations and the agent of node
// (one of agents) runawayAgentRounds more rounds: the positive signals that
// Karpenter looked at the pending pods again and again and chose not to
// launch while the node kept failing. It returns how many rounds each ran
// and how long that took.
func (w *claimWatch) holdRounds(t *testing.T, need int, agents *harness.NodeAgents, node string) (karpenter, agent float64, took time.Duration) {
	t.Helper()
	start := time.Now()
	karpBase := w.e.karpenterRounds(t)
	agentBase := -1.0 // read once the agent serves its metrics; before, it counted nothing
	for {
		w.poll(t, need)
		karpenter = w.e.karpenterRounds(t) - karpBase
		if d := agents.Agent(node); d != nil {
			if v, err := d.TryMetric(agentRounds.Name); err == nil {
				if agentBase < 0 {
					agentBase = 0
				}
				agent = v - agentBase
			}
		}
		if karpenter >= runawayKarpenterRounds && agent >= runawayAgentRounds {
			return karpenter, agent, time.Since(start)
		}
		if time.Since(start) > roundsLimit {
			t.Fatalf("pool %s: in %s Karpenter ran %v scheduling rounds (want %d) and the agent of %s %v rounds (want %d): stuck",
				w.pool, roundsLimit, karpenter, runawayKarpenterRounds, node, agent, runawayAgentRounds)
		}
		time.Sleep(time.Second) // pacing of the poll
	}
}

// agentRounds counts an agent's rounds.
var agentRounds = harness.Counter{Name: "node_ready_loop_iterations_total"}

func names(claims []unstructured.Unstructured) []string {
	out := make([]string, len(claims))
	for i, c := range claims {
		out[i] = c.GetName()
	}
	return out
}

// karpenterRounds reads Karpenter's scheduling simulation count.
func (e *env) karpenterRounds(t *testing.T) float64 {
	t.Helper()
	v, err := e.karp.Metric(schedulingRounds)
	if err != nil {
		t.Fatalf("karpenter metrics: %v", err)
	}
	return v
}

// No runaway: three pending pods that fit one node; the pool's node keeps
// our startup taint for good (its agent's only check can never pass) and is
// protected from remediation. Until Karpenter has simulated the pending pods
// 30 more times and the node's agent has failed 10 more rounds, at every
// poll at most one NodeClaim is alive and no second one is ever created,
// while the webhook keeps scanning.
func (e *env) testNoRunaway(t *testing.T) {
	const pool = "runaway"
	agents := e.pool(t, pool, harness.NodePoolOptions{
		StartupTaints: []corev1.Taint{ourTaint},
		Annotations:   map[string]string{"infra.894.io/protect": "true"},
	}, append([]string{runawayAgentPeriod}, neverVerifies...))
	for i := range 3 {
		e.pendingPod(t, fmt.Sprintf("runaway-%d", i), pool)
	}
	w := e.watchClaims(pool)
	node := w.waitTainted(t, 1)
	scans := e.w.Metric(t, "node_remediation_scans_total", `result="ok"`)
	grown, ran, took := w.holdRounds(t, 1, agents, node)
	w.poll(t, 1)
	scanned := e.w.Metric(t, "node_remediation_scans_total", `result="ok"`) - scans
	if len(w.seen) != 1 {
		t.Errorf("pool %s: %d NodeClaims created for pods one node holds, want 1", pool, len(w.seen))
	}
	for i := range 3 {
		if p := e.pod(t, fmt.Sprintf("runaway-%d", i)); p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s, which never verified", p.Name, p.Spec.NodeName)
		}
	}
	t.Logf("figure: no runaway: %d NodeClaim for 3 pending pods on a node that never verifies while Karpenter simulated them %v times and the agent failed %v rounds (%s; the webhook scanned %v times)",
		len(w.seen), grown, ran, took.Round(time.Second), scanned)
}
