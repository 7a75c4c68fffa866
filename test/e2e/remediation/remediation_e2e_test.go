//go:build e2e

package remediation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// start runs a control plane (with Karpenter's NodeClaim CRD when
// nodeClaimCRD) and one webhook replica with remediation flags, using the
// chart's RBAC rendered with set.
func start(t *testing.T, nodeClaimCRD bool, set []string, args ...string) *env {
	t.Helper()
	e := controlPlane(t, nodeClaimCRD, set)
	e.startWebhook(t, args...)
	return e
}

// controlPlane is start without the webhook.
func controlPlane(t *testing.T, nodeClaimCRD bool, set []string) *env {
	t.Helper()
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	if nodeClaimCRD {
		if err := cp.InstallCRDs(t.Context(), "karpenter", "karpenter.sh_nodeclaims.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.ApplyChartRBAC(t.Context(), ns, set...); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &env{cp: cp, dyn: dyn}
}

// startWebhook runs the webhook replica with the chart's identity and
// remediation flags (args come last, so they override).
func (e *env) startWebhook(t *testing.T, args ...string) {
	t.Helper()
	kubeconfig, err := e.cp.ServiceAccountKubeconfig(t.Context(), ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	const ip = "10.213.0.23"
	e.w = e.cp.StartWebhook(t, "webhook", ip, append([]string{
		"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--pod-name=webhook",
		"--webhook-config-name=", "--extra-sans=" + ip,
		"--unverified-deadline=" + deadline.String(), "--remediation-interval=300ms",
		"--cleanup-retry-base=200ms", "--log-level=debug",
	}, args...)...)
	e.w.WaitReady(t, 30*time.Second)
}

// node creates a Node with the startup taint (as every simulated node).
func (e *env) node(t *testing.T, name string, opts harness.NodeOptions) *corev1.Node {
	t.Helper()
	if _, err := e.cp.CreateNode(t.Context(), name, opts); err != nil {
		t.Fatal(err)
	}
	n, err := e.cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// retainted is a node as the agent leaves it when it re-taints: verified=false,
// the unhealthy taint, and its condition False since just now.
func (e *env) retainted(t *testing.T, name string) {
	t.Helper()
	e.node(t, name, harness.NodeOptions{
		NoStartupTaint: true,
		Labels:         map[string]string{"node-ready/verified": "false"},
		ExtraTaints:    []corev1.Taint{harness.UnhealthyTaint},
	})
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"KubeNodeReady","status":"False","reason":"ChecksFailing","message":"dns failing","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
		time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
	if _, err := e.cp.Client.CoreV1().Nodes().Patch(t.Context(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// nodeClaim creates a NodeClaim and sets its status to name node (by
// nodeName, or by providerID when byProviderID).
func (e *env) nodeClaim(t *testing.T, name string, node *corev1.Node, byProviderID bool) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
			"requirements": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}},
		},
	}}
	res := e.dyn.Resource(remediate.NodeClaims)
	created, err := res.Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]any{"nodeName": node.Name}
	if byProviderID {
		status = map[string]any{"providerID": node.Spec.ProviderID}
	}
	created.Object["status"] = status
	created, err = res.UpdateStatus(t.Context(), created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// patch merge-patches a node (the webhook adds its finalizer meanwhile, so no update).
func (e *env) patch(t *testing.T, name, patch string) {
	t.Helper()
	if _, err := e.cp.Client.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) log(t *testing.T) string {
	t.Helper()
	return e.w.LogT(t)
}

// exists reports whether the node is there.
func (e *env) exists(t *testing.T, name string) bool {
	t.Helper()
	return e.cp.NodeExists(t, name)
}

func (e *env) claimExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.dyn.Resource(remediate.NodeClaims).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// events returns the notes of the Events with reason about node.
func (e *env) events(t *testing.T, node, reason string) []string {
	t.Helper()
	return e.cp.EventNotes(t, "Node", node, reason)
}

// waitEvent waits for an Event with reason about node whose note contains note.
func (e *env) waitEvent(t *testing.T, node, reason, note string) {
	t.Helper()
	e.cp.WaitEvent(t, 20*time.Second, "Node", node, reason, note)
}

// Policy report: a Warning Event and the metric, told once; nothing deleted.
func TestReport(t *testing.T) {
	e := start(t, false, nil, "--remediation=report")
	e.node(t, "stuck", harness.NodeOptions{})
	e.node(t, "fine", harness.NodeOptions{NoStartupTaint: true, Labels: map[string]string{"node-ready/verified": "true"}})
	e.node(t, "no-agent", harness.NodeOptions{NoStartupTaint: true})

	e.waitEvent(t, "stuck", api.EventNodeUnverifiedPastDeadline, "carries "+harness.StartupTaint.Key+" for")
	e.waitEvent(t, "stuck", api.EventNodeUnverifiedPastDeadline, "policy report: nothing is done")
	timed := e.w.Metric(t, scanSeconds, `result="ok"`)
	e.scanned(t, 3, "further scans under policy report", e.stillThere(t, time.Now(), "stuck", "fine", "no-agent"))
	// Each scan is timed before it is counted: the histogram's count keeps
	// up with the counter and moved with these scans.
	scans := e.w.Metric(t, okScans.Name, okScans.Match...)
	if got := e.w.Metric(t, scanSeconds, `result="ok"`); got < scans || got <= timed {
		t.Errorf("%s{result=\"ok\"} = %v after %v scans (%v before these), want it to count every scan", scanSeconds, got, scans, timed)
	}
	if got := e.w.Metric(t, "node_remediation_overdue_nodes"); got != 1 {
		t.Errorf("node_remediation_overdue_nodes = %v, want 1", got)
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="report"`); got != 1 {
		t.Errorf("report actions = %v after several scans, want 1 (told once)", got)
	}
	for _, n := range []string{"stuck", "fine", "no-agent"} {
		if !e.exists(t, n) {
			t.Errorf("node %s deleted under policy report", n)
		}
	}
	for _, n := range []string{"fine", "no-agent"} {
		if ev := e.events(t, n, api.EventNodeUnverifiedPastDeadline); len(ev) > 0 {
			t.Errorf("node %s without the agent's taints reported: %v", n, ev)
		}
	}
}

// Without the NodeClaim API the Node itself is deleted (and cleaned up);
// the missing API is logged once.
func TestReplaceNodeWithoutNodeClaimAPI(t *testing.T) {
	e := start(t, false, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--max-replacing=2")
	for _, n := range []string{"stuck-1", "stuck-2"} {
		e.node(t, n, harness.NodeOptions{})
	}
	for _, n := range []string{"stuck-1", "stuck-2"} {
		harness.WaitFor(t, 30*time.Second, n+" deleted and cleaned up", func() bool { return !e.exists(t, n) })
		e.waitEvent(t, n, api.EventNodeReplacing, "deleted Node "+n)
		e.waitEvent(t, n, api.EventCleanupCompleted, "")
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="delete_node"`, `result="success"`); got != 2 {
		t.Errorf("delete_node successes = %v, want 2", got)
	}
	if n := strings.Count(e.log(t), "the Karpenter NodeClaim API is absent"); n != 1 {
		t.Errorf("absent NodeClaim API logged %d times, want once", n)
	}
}

// With NodeClaims, the one whose status names the node is deleted (by
// status.nodeName or status.providerID) and the Node is left to Karpenter; a
// node without one is deleted itself; a protected node is only reported. A
// node's own ownerReferences name nothing: "pointed" points them at the
// protected node's NodeClaim (as an agent that may patch its node could),
// and that NodeClaim survives.
func TestReplaceDeletesTheNodeClaim(t *testing.T) {
	e := start(t, true, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--max-replacing=10",
		"--remediation-breaker-threshold=off") // five nodes that never verify, on purpose
	byName := e.node(t, "by-name", harness.NodeOptions{})
	e.nodeClaim(t, "claim-by-name", byName, false)

	byID := e.node(t, "by-provider-id", harness.NodeOptions{})
	byID.Spec.ProviderID = "aws:///eu-west-1a/i-0123456789"
	e.patch(t, byID.Name, `{"spec":{"providerID":"aws:///eu-west-1a/i-0123456789"}}`)
	e.nodeClaim(t, "claim-by-provider-id", byID, true)

	protected := e.node(t, "protected", harness.NodeOptions{Annotations: map[string]string{"infra.894.io/protect": "true"}})
	claim := e.nodeClaim(t, "claim-protected", protected, false)
	pointed := e.node(t, "pointed", harness.NodeOptions{})
	e.patch(t, pointed.Name, fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"karpenter.sh/v1","kind":"NodeClaim","name":%q,"uid":%q}]}}`,
		claim.GetName(), claim.GetUID()))
	e.node(t, "orphan", harness.NodeOptions{})
	// An unrelated NodeClaim must survive.
	e.nodeClaim(t, "claim-unrelated", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}, false)

	for node, claim := range map[string]string{"by-name": "claim-by-name", "by-provider-id": "claim-by-provider-id"} {
		harness.WaitFor(t, 30*time.Second, "NodeClaim "+claim+" deleted", func() bool { return !e.claimExists(t, claim) })
		e.waitEvent(t, node, api.EventNodeReplacing, "deleted NodeClaim "+claim)
	}
	for _, n := range []string{"orphan", "pointed"} {
		harness.WaitFor(t, 30*time.Second, n+" deleted", func() bool { return !e.exists(t, n) })
		e.waitEvent(t, n, api.EventNodeReplacing, "deleted Node "+n)
	}
	e.waitEvent(t, "protected", api.EventNodeUnverifiedPastDeadline, "not replaced: the node is protected from deletion")
	e.scanned(t, 3, "further scans with the NodeClaims gone", func() (bool, string) {
		if ok, why := e.stillThere(t, time.Now(), "by-name", "by-provider-id", "protected")(); !ok {
			return false, why + " (its NodeClaim, not the Node, was to be deleted; or it is protected)"
		}
		if !e.claimExists(t, "claim-unrelated") || !e.claimExists(t, "claim-protected") {
			return false, "an unrelated NodeClaim, or the protected node's, was deleted"
		}
		return true, ""
	})
	// Karpenter deletes the Node once the instance is gone; until then it stays, marked.
	for _, n := range []string{"by-name", "by-provider-id"} {
		got, err := e.cp.Client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v (its NodeClaim, not the Node, was to be deleted)", n, err)
		}
		if got.Annotations[remediate.ReplacingAnnotation] == "" {
			t.Errorf("node %s lacks %s", n, remediate.ReplacingAnnotation)
		}
	}
	if !e.exists(t, "protected") || !e.claimExists(t, "claim-unrelated") || !e.claimExists(t, "claim-protected") {
		t.Error("the protected node, its NodeClaim or an unrelated NodeClaim was deleted")
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="delete_nodeclaim"`, `result="success"`); got != 2 {
		t.Errorf("delete_nodeclaim successes = %v, want 2", got)
	}
	if got := e.w.Metric(t, "node_remediation_replacing_nodes"); got != 2 {
		t.Errorf("node_remediation_replacing_nodes = %v, want 2 (NodeClaims deleted, Nodes still there)", got)
	}
	if got := e.w.Metric(t, "node_remediation_blocked_nodes", `reason="protected"`); got != 1 {
		t.Errorf("blocked{protected} = %v, want 1", got)
	}
}

// NodeClaims installed but not granted (chart value nodeClaims=false):
// forbidden degrades to deleting the Node, logged once.
func TestReplaceNodeClaimsForbidden(t *testing.T) {
	e := start(t, true, []string{"webhook.remediation.policy=replace", "webhook.remediation.nodeClaims=false"},
		"--remediation=replace", "--max-replacing=2")
	n1 := e.node(t, "forbidden-1", harness.NodeOptions{})
	e.nodeClaim(t, "claim-forbidden-1", n1, false)
	e.node(t, "forbidden-2", harness.NodeOptions{})
	for _, n := range []string{"forbidden-1", "forbidden-2"} {
		harness.WaitFor(t, 30*time.Second, n+" deleted", func() bool { return !e.exists(t, n) })
	}
	if n := strings.Count(e.log(t), "the Karpenter NodeClaim API is forbidden"); n != 1 {
		t.Errorf("forbidden NodeClaim API logged %d times, want once", n)
	}
}

// Dry run: Events and the metric say what would be deleted; nothing is.
func TestDryRun(t *testing.T) {
	e := start(t, true, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--remediation-dry-run")
	n1 := e.node(t, "dry-1", harness.NodeOptions{})
	e.nodeClaim(t, "claim-dry-1", n1, false)
	e.node(t, "dry-2", harness.NodeOptions{})
	e.waitEvent(t, "dry-1", api.EventNodeUnverifiedPastDeadline, "dry run: would delete NodeClaim claim-dry-1")
	e.waitEvent(t, "dry-2", api.EventNodeUnverifiedPastDeadline, "dry run: would delete Node dry-2")
	e.scanned(t, 3, "further dry-run scans", func() (bool, string) {
		if ok, why := e.stillThere(t, time.Now(), "dry-1", "dry-2")(); !ok {
			return false, "dry run deleted something: " + why
		}
		if !e.claimExists(t, "claim-dry-1") {
			return false, "dry run deleted NodeClaim claim-dry-1"
		}
		return true, ""
	})
	if !e.exists(t, "dry-1") || !e.exists(t, "dry-2") || !e.claimExists(t, "claim-dry-1") {
		t.Error("dry run deleted something")
	}
	for _, n := range []string{"dry-1", "dry-2"} {
		got, err := e.cp.Client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := got.Annotations[remediate.ReplacingAnnotation]; ok {
			t.Errorf("dry run marked %s as replacing (%q)", n, v)
		}
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="dry_run"`); got != 2 {
		t.Errorf("dry_run actions = %v after several scans, want 2 (told once per node)", got)
	}
}

// While the agents' fleet budget is used up nothing is replaced: not a new
// node, and never the re-tainted ones, which verified once and serve (only
// reported). Once fewer nodes are re-tainted than the budget, the new node
// is replaced; the re-tainted one left is still only reported.
func TestFleetBudgetHoldsReplacement(t *testing.T) {
	e := start(t, false, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--agent-fleet-budget=2")
	for _, n := range []string{"retainted-1", "retainted-2", "retainted-3"} {
		e.retainted(t, n)
	}
	e.node(t, "new", harness.NodeOptions{})
	e.waitEvent(t, "new", api.EventNodeUnverifiedPastDeadline, "fleet budget of 2 is used up")
	e.waitEvent(t, "retainted-2", api.EventNodeUnverifiedPastDeadline, "the node verified once and serves workloads")
	e.scanned(t, 3, "further scans while the fleet budget is used up", e.stillThere(t, time.Now(), "new", "retainted-1", "retainted-2", "retainted-3"))
	if got := e.w.Metric(t, "node_remediation_blocked_nodes", `reason="fleet_budget"`); got != 1 {
		t.Errorf("blocked{fleet_budget} = %v, want 1", got)
	}
	if got := e.w.Metric(t, "node_remediation_blocked_nodes", `reason="in_service"`); got != 3 {
		t.Errorf("blocked{in_service} = %v, want 3", got)
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="delete_node"`); got != 0 {
		t.Errorf("delete_node actions = %v while held, want 0", got)
	}
	if n := strings.Count(e.log(t), "not replacing overdue nodes: the agents' fleet budget is used up"); n != 1 {
		t.Errorf("fleet budget hold logged %d times, want once", n)
	}
	// Two re-tainted nodes recover: the agents label them verified and drop the taint.
	for _, n := range []string{"retainted-1", "retainted-2"} {
		patch := `{"metadata":{"labels":{"node-ready/verified":"true"}},"spec":{"taints":null}}`
		if _, err := e.cp.Client.CoreV1().Nodes().Patch(t.Context(), n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.WaitFor(t, 60*time.Second, "new replaced once the budget has room", func() bool { return !e.exists(t, "new") })
	e.scanned(t, 3, "further scans with room in the budget", e.stillThere(t, time.Now(), "retainted-1", "retainted-2", "retainted-3"))
	if n := strings.Count(e.log(t), "fleet budget no longer used up"); n < 1 {
		t.Errorf("fleet recovery logged %d times, want it logged", n)
	}
}

// 20 nodes that never verify, --max-replacing=3, NodeClaims that a stand-in
// for Karpenter turns into a Node deletion after a while: never more than 3
// nodes are going away at once, and all 20 are replaced in the end.
func TestBudgetUnderTwentyNeverVerifyingNodes(t *testing.T) {
	e := start(t, true, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--max-replacing=3",
		"--remediation-breaker-threshold=off") // twenty nodes that never verify, on purpose
	const count, limit = 20, 3
	claims := map[string]string{}
	for i := range count {
		name := fmt.Sprintf("never-%02d", i)
		n := e.node(t, name, harness.NodeOptions{})
		claims[e.nodeClaim(t, "claim-"+name, n, false).GetName()] = name
	}
	// Karpenter's part: a deleted NodeClaim's instance goes away 1.5 s later,
	// then its Node is deleted (and our cleanup runs).
	ctx, cancel := context.WithCancel(t.Context())
	var kwg sync.WaitGroup
	defer func() { cancel(); kwg.Wait() }()
	kwg.Go(func() {
		seen := map[string]bool{}
		for ctx.Err() == nil {
			for claim, node := range claims {
				if seen[claim] {
					continue
				}
				if _, err := e.dyn.Resource(remediate.NodeClaims).Get(ctx, claim, metav1.GetOptions{}); apierrors.IsNotFound(err) {
					seen[claim] = true
					kwg.Go(func() {
						select {
						case <-time.After(1500 * time.Millisecond):
						case <-ctx.Done():
							return
						}
						_ = e.cp.Client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
					})
				}
			}
			time.Sleep(50 * time.Millisecond) // pacing: the stand-in for Karpenter looks 20 times a second
		}
	})
	// Going away: a node still present whose NodeClaim is deleted, or that is
	// marked or being deleted.
	most, gone := 0, 0
	start := time.Now()
	for gone < count {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("only %d of %d nodes replaced after %s", gone, count, time.Since(start))
		}
		nodes, err := e.cp.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, err := e.dyn.Resource(remediate.NodeClaims).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		live := map[string]bool{}
		for _, c := range list.Items {
			live[c.GetName()] = true
		}
		going, present := 0, 0
		for _, n := range nodes.Items {
			if !strings.HasPrefix(n.Name, "never-") {
				continue
			}
			present++
			if !live["claim-"+n.Name] || n.DeletionTimestamp != nil || n.Annotations[remediate.ReplacingAnnotation] != "" {
				going++
			}
		}
		most = max(most, going)
		if going > limit {
			t.Fatalf("%d nodes going away at once, --max-replacing=%d", going, limit)
		}
		gone = count - present
		time.Sleep(100 * time.Millisecond) // pacing: the budget is sampled 10 times a second, bounded by the 3-minute limit above
	}
	t.Logf("%d nodes replaced in %s, at most %d going away at once", count, time.Since(start).Round(100*time.Millisecond), most)
	if most < limit {
		t.Errorf("at most %d nodes went away at once; the budget of %d was never used in full", most, limit)
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="delete_nodeclaim"`, `result="success"`); got != count {
		t.Errorf("delete_nodeclaim successes = %v, want %d", got, count)
	}
	var blocked []string
	for _, n := range []string{"never-19", "never-18"} {
		blocked = append(blocked, e.events(t, n, api.EventNodeUnverifiedPastDeadline)...)
	}
	if !slices.ContainsFunc(blocked, func(s string) bool { return strings.Contains(s, "--max-replacing allows 3") }) {
		t.Errorf("the last nodes never recorded waiting for the budget: %v", blocked)
	}
	out, _ := json.Marshal(blocked)
	t.Logf("waiting Events of the last nodes: %s", out)
}
