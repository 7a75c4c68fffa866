//go:build e2e

package remediation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// okScans counts the webhook's completed remediation scans.
var okScans = harness.Counter{Name: "node_remediation_scans_total", Match: []string{`result="ok"`}}

// scanSeconds is the sample count of the scan duration histogram.
const scanSeconds = "node_remediation_scan_duration_seconds_count"

// scanned waits until the webhook has completed n more remediation scans
// than it had when called: the positive signal every "nothing happened"
// here is anchored on. While waiting, check (when given) must hold.
func (e *env) scanned(t *testing.T, n int, what string, check func() (ok bool, why string)) {
	t.Helper()
	e.w.WaitCounter(t, okScans, n, what, check)
}

// stillThere is a check for scanned: every named node exists and is not
// being deleted; since is when the test last changed them, for the message.
func (e *env) stillThere(t *testing.T, since time.Time, names ...string) func() (bool, string) {
	return func() (bool, string) {
		for _, name := range names {
			n, err := e.cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && n.DeletionTimestamp != nil) {
				return false, fmt.Sprintf("node %s deleted %s after the test last changed it", name, time.Since(since).Round(100*time.Millisecond))
			}
		}
		return true, ""
	}
}

// retaint does to a verified node what its agent does when it re-taints it.
func (e *env) retaint(t *testing.T, name string) {
	t.Helper()
	p, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": map[string]string{"node-ready/verified": "false"}},
		"spec":     map[string]any{"taints": []corev1.Taint{harness.UnhealthyTaint}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.patch(t, name, string(p))
}

// verify does what the agent does when the node passes its checks.
func (e *env) verify(t *testing.T, name string) {
	t.Helper()
	e.patch(t, name, `{"metadata":{"labels":{"node-ready/verified":"true"}},"spec":{"taints":null}}`)
}

func (e *env) annotation(t *testing.T, name, key string) (string, bool) {
	t.Helper()
	n, err := e.cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := n.Annotations[key]
	return v, ok
}

// Point 1: a replacing annotation left on a verified node (an earlier
// failed attempt, an earlier version, a person) never shortcuts the gates.
// Before the fix a brief re-taint got the protected node deleted as a
// "stalled" replacement within a scan, and the unprotected one too, long
// before any deadline. Now neither is deleted, the stale marks are removed,
// and both recover.
func TestStaleMarkNeverShortcutsTheGates(t *testing.T) {
	e := start(t, false, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--max-replacing=2",
		"--unverified-deadline=1m")
	stale := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	verified := map[string]string{"node-ready/verified": "true"}
	e.node(t, "protected", harness.NodeOptions{NoStartupTaint: true, Labels: verified,
		Annotations: map[string]string{"infra.894.io/protect": "true", remediate.ReplacingAnnotation: stale}})
	e.node(t, "plain", harness.NodeOptions{NoStartupTaint: true, Labels: verified,
		Annotations: map[string]string{remediate.ReplacingAnnotation: stale}})
	e.scanned(t, 2, "the webhook has looked at the verified nodes", nil)

	retainted := time.Now()
	for _, n := range []string{"protected", "plain"} {
		e.retaint(t, n)
	}
	e.scanned(t, 6, "the brief re-taint was seen", e.stillThere(t, retainted, "protected", "plain"))
	for _, n := range []string{"protected", "plain"} {
		harness.Eventually(t, 10*time.Second, "stale mark removed from "+n, func() (bool, string) {
			v, ok := e.annotation(t, n, remediate.ReplacingAnnotation)
			return !ok, v
		})
		e.verify(t, n)
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="delete_node"`); got != 0 {
		t.Errorf("delete_node actions = %v, want 0", got)
	}
}

// Point 1: a retry is no shortcut. Two nodes are replaced by deleting their
// NodeClaims; nothing (no Karpenter here) deletes the Nodes, so both stall
// with this controller's own valid mark. One is then protected. When the
// retry comes, the unprotected one is deleted (the positive signal), the
// protected one is not: the retry passed the same gates as a first attempt.
// The retry's timing (--remediation-stall-after) is proven on a fake clock
// (internal/webhook/remediate TestStalledReplacementRetriedAfterStallAfter);
// 10 s here leaves room to protect the node first on a loaded machine.
func TestRetryPassesTheSameGates(t *testing.T) {
	e := start(t, true, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--max-replacing=2",
		"--remediation-stall-after=10s")
	for _, name := range []string{"kept", "retried"} {
		n := e.node(t, name, harness.NodeOptions{})
		e.nodeClaim(t, "claim-"+name, n, false)
	}
	for _, name := range []string{"kept", "retried"} {
		harness.WaitFor(t, 30*time.Second, "NodeClaim claim-"+name+" deleted", func() bool { return !e.claimExists(t, "claim-"+name) })
	}
	e.patch(t, "kept", `{"metadata":{"annotations":{"infra.894.io/protect":"true"}}}`)
	protected := time.Now()
	harness.Eventually(t, 90*time.Second, "the stalled replacement of retried tried again", func() (bool, string) {
		if ok, why := e.stillThere(t, protected, "kept")(); !ok {
			t.Fatalf("the protected node was deleted by the retry: %s", why)
		}
		if !e.exists(t, "retried") {
			return true, ""
		}
		return false, "retried still there"
	})
	if !e.exists(t, "kept") {
		t.Fatal("the protected node was deleted by the retry")
	}
}

// Point 1: a node this controller marked (its NodeClaim deleted, the Node
// still there) that verifies after all loses its mark, so a later re-taint
// starts from nothing.
func TestMarkRemovedWhenTheNodeVerifies(t *testing.T) {
	e := start(t, true, []string{"webhook.remediation.policy=replace"}, "--remediation=replace")
	n := e.node(t, "late", harness.NodeOptions{})
	e.nodeClaim(t, "claim-late", n, false)
	harness.WaitFor(t, 30*time.Second, "NodeClaim claim-late deleted", func() bool { return !e.claimExists(t, "claim-late") })
	value, ok := e.annotation(t, "late", remediate.ReplacingAnnotation)
	var m remediate.Mark
	if !ok || json.Unmarshal([]byte(value), &m) != nil || m.UID != n.UID || m.Taint != harness.StartupTaint.Key {
		t.Fatalf("mark %q (present %v): want this controller's mark for this node's UID and startup taint", value, ok)
	}
	e.verify(t, "late")
	harness.Eventually(t, 20*time.Second, "mark removed from the verified node", func() (bool, string) {
		v, ok := e.annotation(t, "late", remediate.ReplacingAnnotation)
		return !ok, v
	})
	if got := e.w.Metric(t, "node_remediation_replacing_nodes"); got != 0 {
		t.Errorf("node_remediation_replacing_nodes = %v after the node verified, want 0", got)
	}
}

// Point 3: an API server outage longer than the deadline does not make
// every unverified node overdue the moment it is back: the agents could not
// verify meanwhile. The outage is seen (scans counted as api_unreachable)
// and the node is replaced a full deadline after the API server answered.
// The replica runs without leader election, so it keeps leading through the
// outage (with election, losing the Lease also restarts every node's time:
// internal/webhook/remediate TestNewLeaderGivesAFullDeadlineOnTheClock).
func TestOutageGivesAFairChance(t *testing.T) {
	// An outage longer than the deadline.
	const deadline = 5 * time.Second
	e := start(t, false, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--leader-elect=false",
		"--unverified-deadline="+deadline.String())
	e.node(t, "during-outage", harness.NodeOptions{})
	// The webhook's cache holds the node as it stays (finalizer back-filled),
	// so nothing but the gates can hold its delete once the API server is back.
	e.cp.WaitNode(t, "during-outage", 30*time.Second, "finalizer back-filled", func(n *corev1.Node) bool {
		return slices.Contains(n.Finalizers, harness.Finalizer)
	})
	e.scanned(t, 2, "the webhook's cache caught up", nil)
	if err := e.cp.RestartAPIServer(t.Context(), deadline+2*time.Second); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	harness.WaitFor(t, 60*time.Second, "during-outage replaced", func() bool { return !e.exists(t, "during-outage") })
	// The webhook's probe answered at the earliest as the API server became
	// ready, a little before RestartAPIServer returned.
	took := time.Since(back)
	t.Logf("replaced %s after the API server was back", took.Round(100*time.Millisecond))
	if took < deadline-500*time.Millisecond {
		t.Fatalf("replaced %s after the API server was back, before --unverified-deadline=%s", took.Round(100*time.Millisecond), deadline)
	}
	if got := e.w.Metric(t, "node_remediation_scans_total", `result="api_unreachable"`); got < 1 {
		t.Errorf("scans{api_unreachable} = %v, want the outage seen", got)
	}
	if !strings.Contains(e.log(t), "every unverified node gets a full deadline from now") {
		t.Error("the webhook did not say that nodes get a fresh deadline after the outage")
	}
}

// Point 4: when most new nodes never verify, the circuit breaker stops
// replacing (said once: Event, metric, log), and resumes when a new node
// verifies.
func TestCircuitBreaker(t *testing.T) {
	e := start(t, false, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--max-replacing=5",
		"--remediation-breaker-threshold=50%", "--remediation-breaker-window=4")
	e.node(t, "never-1", harness.NodeOptions{})
	harness.WaitFor(t, 30*time.Second, "never-1 replaced (1 of 4 new nodes failed)", func() bool { return !e.exists(t, "never-1") })

	e.node(t, "never-2", harness.NodeOptions{})
	e.node(t, "never-3", harness.NodeOptions{})
	harness.Eventually(t, 30*time.Second, "circuit breaker open", func() (bool, string) {
		for _, n := range []string{"never-2", "never-3"} {
			if !e.exists(t, n) {
				return false, n + " replaced although 2 of the last 4 new nodes never verified"
			}
		}
		v, err := e.w.TryMetric("node_remediation_circuit_open")
		return err == nil && v == 1, fmt.Sprintf("node_remediation_circuit_open = %v (%v)", v, err)
	})
	e.scanned(t, 5, "held by the breaker", func() (bool, string) {
		for _, n := range []string{"never-2", "never-3"} {
			if !e.exists(t, n) {
				return false, n + " replaced while the breaker was open"
			}
		}
		return true, ""
	})
	paused := len(e.events(t, "never-2", api.EventRemediationPaused)) + len(e.events(t, "never-3", api.EventRemediationPaused))
	if paused != 1 {
		t.Errorf("%d %s Events, want 1 (said once)", paused, api.EventRemediationPaused)
	}
	if got := e.w.Metric(t, "node_remediation_blocked_nodes", `reason="circuit_breaker"`); got != 2 {
		t.Errorf("blocked{circuit_breaker} = %v, want 2", got)
	}
	if n := strings.Count(e.log(t), "circuit breaker open"); n != 1 {
		t.Errorf("breaker opening logged %d times, want once", n)
	}

	// A new node verifies: the breaker closes, the held nodes are replaced.
	e.node(t, "healthy", harness.NodeOptions{})
	e.scanned(t, 2, "the new node was seen unverified", nil)
	e.verify(t, "healthy")
	e.waitEvent(t, "healthy", api.EventRemediationResumed, "resumes")
	for _, n := range []string{"never-2", "never-3"} {
		harness.WaitFor(t, 30*time.Second, n+" replaced after the breaker closed", func() bool { return !e.exists(t, n) })
	}
	if got := e.w.Metric(t, "node_remediation_circuit_open"); got != 0 {
		t.Errorf("node_remediation_circuit_open = %v after a new node verified, want 0", got)
	}
	if !e.exists(t, "healthy") {
		t.Error("the verified node was replaced")
	}
}

// A node an operator bypassed (the agent's node-ready/skip-verification)
// whose agent is down still carries the unhealthy taint and verified=false:
// it is neither replaced nor counted against the agents' fleet budget, so
// with a budget of 1 another overdue node is replaced.
func TestBypassedNodeIsNeitherReplacedNorCounted(t *testing.T) {
	e := start(t, false, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--agent-fleet-budget=1")
	e.retainted(t, "bypassed")
	patch := `{"metadata":{"annotations":{"node-ready/skip-verification":"true"}}}`
	if _, err := e.cp.Client.CoreV1().Nodes().Patch(t.Context(), "bypassed", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.node(t, "overdue", harness.NodeOptions{})
	harness.WaitFor(t, 60*time.Second, "the overdue node replaced beside a bypassed re-tainted node", func() bool { return !e.exists(t, "overdue") })
	e.scanned(t, 3, "the bypassed node kept", func() (bool, string) {
		if !e.exists(t, "bypassed") {
			return false, "the bypassed node was replaced"
		}
		return true, ""
	})
	if got := e.w.Metric(t, "node_remediation_blocked_nodes", `reason="fleet_budget"`); got != 0 {
		t.Errorf("blocked{fleet_budget} = %v, want 0: a bypassed node holds no slot", got)
	}
}
