package remediate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// The delete is decided on what the API server says right before it, not
// on the cache the plan was made from: a node the cache still shows overdue
// but that verified, was protected, or was deleted and created again under
// its name since is left alone; one unchanged is replaced (the positive
// control).
func TestReplaceJudgesTheFreshRead(t *testing.T) {
	cases := []struct {
		name string
		// since edits the API server's node after the cache was filled.
		since       func(*corev1.Node) *corev1.Node
		wantDeleted bool
	}{
		{"unchanged: replaced", func(n *corev1.Node) *corev1.Node { return n }, true},
		{"verified since the cache was filled", func(n *corev1.Node) *corev1.Node {
			n.Spec.Taints, n.Labels["node-ready/verified"] = nil, "true"
			return n
		}, false},
		{"protected since the cache was filled", func(n *corev1.Node) *corev1.Node {
			n.Annotations["infra.894.io/protect"] = "true"
			return n
		}, false},
		{"re-created under the same name", recreated, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Hour, taint(startup))})
			cached := f.cached("n")
			if err := f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), tc.since(f.node("n").DeepCopy()), ""); err != nil {
				t.Fatal(err)
			}
			f.scan(cached...)
			if deleted := f.node("n") == nil; deleted != tc.wantDeleted {
				t.Fatalf("deleted %v, want %v", deleted, tc.wantDeleted)
			}
			if !tc.wantDeleted && len(f.patches()) != 0 {
				t.Errorf("a node held on the fresh read was written: %s", f.patches()[0].GetPatch())
			}
		})
	}
}

// The fresh read is bound to the UID the plan judged: another incarnation
// of the name is never marked or deleted for it, even one this replica has
// watched unverified for as long (its own time is judged on its own).
func TestReplaceNeverActsOnAnotherIncarnation(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Hour, taint(startup))})
	judged := f.cached("n")[0]
	again := recreated(judged)
	if err := f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), again, ""); err != nil {
		t.Fatal(err)
	}
	watched(f.c, again)
	if gone, _ := f.c.replace(t.Context(), Overdue{Node: judged, Taint: startup, Since: judged.CreationTimestamp.Time}, 1, time.Hour); gone {
		t.Error("replace reported the node going away")
	}
	f.expectActions(f.actions(), "get nodes n")
	if f.node("n") == nil {
		t.Error("another incarnation of the name was deleted")
	}
}

// Mark, then delete: the mark is written with the fresh read's UID and
// resourceVersion and names that incarnation, and the delete is guarded by
// the marked node's UID and resourceVersion.
func TestReplaceMarksThenDeletes(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Hour, taint(startup))})
	cached := f.cached("n")
	fresh := f.node("n")
	f.expectActions(f.scan(cached...), "get nodes n", "list nodes", "list pods", "patch nodes n", "delete nodes n")

	uid, rv, m := f.markPatch(f.patches()[0])
	if uid != fresh.UID || rv != fresh.ResourceVersion {
		t.Errorf("mark guarded by uid %q rv %q, want the fresh read's %q %q", uid, rv, fresh.UID, fresh.ResourceVersion)
	}
	want := Mark{By: markAuthor, UID: fresh.UID, Taint: startup, Verified: "", At: t0}
	if m != want {
		t.Errorf("mark %+v, want %+v", m, want)
	}
	del := f.deletes()[0].GetDeleteOptions().Preconditions
	if del == nil || del.UID == nil || *del.UID != fresh.UID || del.ResourceVersion == nil || *del.ResourceVersion != "1001" {
		t.Errorf("delete preconditions %+v, want the marked node's UID %q and resourceVersion 1001 (the mark's write)", del, fresh.UID)
	}
	if f.node("n") != nil {
		t.Error("node not deleted")
	}
	if got := f.count("delete_node", "success"); got != 1 {
		t.Errorf("delete_node success = %v, want 1", got)
	}
	f.expectEvents(api.EventNodeReplacing)
}

// Mark, delete fails, unmark: a mark without a delete would hold the
// budget, so it is removed with a patch that tests the node's UID and the
// mark's value (a newer mark written since stays).
func TestFailedDeleteRemovesTheMark(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Hour, taint(startup))})
	fail(f.client, "delete", "nodes", apierrors.NewInternalError(errBoom))
	f.expectActions(f.scan(f.cached("n")...), "get nodes n", "list nodes", "list pods", "patch nodes n", "delete nodes n", "patch nodes n")

	marked, unmark := f.patches()[0], f.patches()[1]
	_, _, m := f.markPatch(marked)
	n := f.node("n")
	if _, ok := n.Annotations[f.c.cfg.ReplacingAnnotation]; ok {
		t.Errorf("mark left after the failed delete: %v", n.Annotations)
	}
	if string(unmark.GetPatchType()) != "application/json-patch+json" {
		t.Fatalf("unmark patch of type %s", unmark.GetPatchType())
	}
	for _, want := range []string{`{"op":"test","path":"/metadata/uid","value":"` + string(n.UID) + `"}`, `"op":"remove"`} {
		if !contains(unmark.GetPatch(), want) {
			t.Errorf("unmark patch %s lacks %s", unmark.GetPatch(), want)
		}
	}
	if m.UID != n.UID {
		t.Errorf("mark for uid %q, node %q", m.UID, n.UID)
	}
	if f.count("delete_node", "error") != 1 || f.count("unmark", "success") != 1 {
		t.Errorf("delete_node error %v, unmark success %v; want 1 and 1", f.count("delete_node", "error"), f.count("unmark", "success"))
	}
	f.expectEvents(api.EventNodeReplaceFailed)
}

// A validly marked node still present (the delete after the mark was lost,
// Karpenter has not acted) is deleted again once its mark has stalled,
// through the same gates and without a second mark; a node whose name
// carries the mark of an earlier incarnation is unmarked, never trusted, and
// judged as itself.
func TestMarkedNodeIsRetriedAndAnEarlierIncarnationsMarkIsRemoved(t *testing.T) {
	stuck := node("stuck", time.Hour, taint(startup), marked())
	reborn := recreated(node("reborn", time.Hour, taint(startup), marked()))
	f := newFixture(t, PolicyReplace, []*corev1.Node{stuck, reborn})
	f.c.cfg.MaxReplacing = mustBudget(t, "2")
	cached := f.cached("stuck", "reborn")

	// First sight of the valid mark: counted, not retried yet. The other
	// mark names another UID: removed (a UID test guards the unmark), and
	// its node is judged and marked as itself.
	f.expectActions(f.scan(cached...), "patch nodes reborn", "get nodes reborn", "list nodes", "list pods", "patch nodes reborn", "delete nodes reborn")
	if !contains(f.patches()[0].GetPatch(), string(reborn.UID)) {
		t.Errorf("unmark %s does not test the live node's UID %s", f.patches()[0].GetPatch(), reborn.UID)
	}
	if _, _, m := f.markPatch(f.patches()[1]); m.UID != reborn.UID {
		t.Errorf("new mark for uid %s, want the live incarnation's %s", m.UID, reborn.UID)
	}

	f.clock.SetTime(t0.Add(time.Minute))
	f.expectActions(f.scan(cached[0]), "get nodes stuck", "list nodes", "list pods", "delete nodes stuck")
	if f.node("stuck") != nil {
		t.Error("stalled replacement not retried")
	}
	f.expectEvents(api.EventNodeReplacing, api.EventNodeReplacing)
}

// A node that left the unverified set (it verified) loses its mark, and as
// a new node that verified it closes an open circuit breaker, said once.
func TestNodeThatVerifiedIsUnmarkedAndClosesTheBreaker(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Minute, taint(startup), marked())})
	f.c.brks = newBreakers(Breaker{Threshold: 0.5, Window: 2})
	f.c.brks.of("").record(true)
	if !f.c.brks.of("").open {
		t.Fatal("breaker not open")
	}
	cached := f.cached("n")
	verified := f.node("n")
	verified.Spec.Taints, verified.Labels["node-ready/verified"] = nil, "true"
	if err := f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), verified, ""); err != nil {
		t.Fatal(err)
	}
	f.c.obs.leave(cached[0]) // the informer's delete: it left the label selector

	f.expectActions(f.scan(), "get nodes n", "patch nodes n")
	if n := f.node("n"); n.Annotations[f.c.cfg.ReplacingAnnotation] != "" {
		t.Errorf("mark kept on a verified node: %v", n.Annotations)
	}
	if f.c.brks.of("").open {
		t.Error("breaker still open after a new node verified")
	}
	f.expectEvents(api.EventRemediationResumed)
}

// A node re-created under the name of one that left keeps its own state:
// nothing is read into it.
func TestLeaverRecreatedUnderItsNameIsLeftAlone(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Minute, taint(startup), marked())})
	cached := f.cached("n")
	if err := f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), recreated(cached[0]), ""); err != nil {
		t.Fatal(err)
	}
	f.c.obs.leave(cached[0])
	f.expectActions(f.scan(), "get nodes n")
}

// Dry run reads, decides and tells once; it marks and deletes nothing.
func TestDryRunWritesNothing(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Hour, taint(startup))})
	f.c.cfg.DryRun = true
	cached := f.cached("n")
	f.expectActions(f.scan(cached...), "get nodes n", "list nodes", "list pods")
	f.expectActions(f.scan(cached...)) // told already: not read again
	if f.count("dry_run", "success") != 1 {
		t.Errorf("dry_run = %v, want 1", f.count("dry_run", "success"))
	}
	f.expectEvents(api.EventNodeUnverifiedPastDeadline)
}

// Report tells once per node and reads nothing from the API server.
func TestReportTellsOnce(t *testing.T) {
	f := newFixture(t, PolicyReport, []*corev1.Node{node("n", time.Hour, taint(startup))})
	cached := f.cached("n")
	f.expectActions(f.scan(cached...))
	f.expectActions(f.scan(cached...))
	if f.count("report", "success") != 1 {
		t.Errorf("report = %v, want 1", f.count("report", "success"))
	}
	f.expectEvents(api.EventNodeUnverifiedPastDeadline)
}

// While the API server does not answer nothing is judged; when it answers
// again every node gets a full deadline.
func TestUnreachableAPIServerJudgesNothing(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Hour, taint(startup))})
	cached := f.cached("n")
	f.probeErr = errBoom
	f.expectActions(f.scan(cached...))
	f.probeErr = nil
	// Scans every minute from the first answer: the node's time restarted
	// then, so it is overdue a full deadline later, not before.
	for m := 1; m < 31; m++ {
		f.clock.SetTime(t0.Add(time.Duration(m) * time.Minute))
		f.expectActions(f.scan(cached...))
	}
	f.clock.SetTime(t0.Add(31 * time.Minute))
	f.expectActions(f.scan(cached...), "get nodes n", "list nodes", "list pods", "patch nodes n", "delete nodes n")
	if got := testutilScans(f, "api_unreachable"); got != 1 {
		t.Errorf("api_unreachable scans %v, want 1", got)
	}
}

// Held replacements are told once per node and reason, with the reason.
func TestHeldReplacementsAreTold(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{
		node("r", time.Minute, taint(unhealthy), label("node-ready/verified", "false")),
		node("p", time.Hour, taint(startup), annotation("infra.894.io/protect", "true")),
		node("a", 2*time.Hour, taint(startup)),
	})
	f.c.cfg.FleetBudget = mustBudget(t, "1")
	cached := f.cached("r", "p", "a")
	f.expectActions(f.scan(cached...))
	got := f.recorded()
	if len(got) != 2 || !contains([]byte(got[0]), "fleet budget of 1 is used up") || !contains([]byte(got[1]), "protected") {
		t.Errorf("events %q, want the fleet-budget hold on a, then the protection of p", got)
	}
	f.expectActions(f.scan(cached...))
	f.expectEvents() // told once
	if g := gauge(f, blockedFleet); g != 1 {
		t.Errorf("blocked{fleet_budget} = %v, want 1", g)
	}
	// The budget frees up: the cluster-wide fault is over, and a gets a full
	// deadline from now before it is replaced (a node still recovering from
	// the fault is not replaced the moment another's recovery frees a slot).
	f.c.cfg.FleetBudget = mustBudget(t, "5")
	freed := f.clock.Now()
	for f.clock.Now().Sub(freed) < 30*time.Minute { // scans every interval, a deadline long
		f.expectActions(f.scan(cached...))
		f.clock.Step(30 * time.Second)
	}
	f.expectActions(f.scan(cached...), "get nodes a", "list nodes", "list pods", "patch nodes a", "delete nodes a")
	if g := gauge(f, blockedFleet); g != 0 {
		t.Errorf("blocked{fleet_budget} = %v after the budget freed up, want 0", g)
	}
}

// When the circuit breaker opens, that is told once, on the first node it
// holds.
func TestBreakerOpeningIsTold(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("a", time.Hour, taint(startup))})
	f.c.brks = newBreakers(Breaker{Threshold: 0.5, Window: 2})
	cached := f.cached("a")
	f.expectActions(f.scan(cached...))
	got := f.recorded()
	if len(got) != 2 || !contains([]byte(got[0]), api.EventRemediationPaused) || !contains([]byte(got[1]), "circuit breaker is open") {
		t.Errorf("events %q, want RemediationPaused then the hold", got)
	}
	if testutilCircuit(f) != 1 {
		t.Error("node_remediation_circuit_open not 1")
	}
}

// The NodeClaim whose status names a node is deleted, guarded by its UID;
// one Karpenter is deleting already is left to it. The Node's own
// ownerReferences name nothing: whoever may patch the node could point them
// at any NodeClaim, here a protected node's.
func TestReplaceDeletesTheNodeClaimThatNamesTheNode(t *testing.T) {
	byName := claim("claim-a", "a", "")
	byID := claim("claim-b", "", "aws:///b")
	elsewhere := claim("claim-z", "z", "aws:///z")
	f := newFixture(t, PolicyReplace, []*corev1.Node{
		node("a", 2*time.Hour, taint(startup)),
		node("b", time.Hour, taint(startup), providerID("aws:///b")),
		node("c", 90*time.Minute, taint(startup), ownedBy(elsewhere)),
		node("z", 3*time.Hour, taint(startup), providerID("aws:///z"), annotation("infra.894.io/protect", "true")),
	}, byName, byID, elsewhere)
	f.c.cfg.NodeClaims = true
	f.c.cfg.MaxReplacing = mustBudget(t, "3")
	f.expectActions(f.scan(f.cached("a", "b", "c", "z")...),
		"get nodes a", "list nodes", "list pods", "patch nodes a",
		"get nodes c", "list nodes", "list pods", "patch nodes c", "delete nodes c",
		"get nodes b", "list nodes", "list pods", "patch nodes b",
		"list nodeclaims", "delete nodeclaims claim-a", "delete nodeclaims claim-b")
	deletes := f.deletes()
	for i, cl := range []string{"", string(byName.GetUID()), string(byID.GetUID())} {
		if i == 0 {
			continue // the Node c: its UID and resourceVersion, checked elsewhere
		}
		if p := deletes[i].GetDeleteOptions().Preconditions; p == nil || p.UID == nil || string(*p.UID) != cl {
			t.Errorf("delete %d preconditions %+v, want the NodeClaim's UID %s", i, p, cl)
		}
	}
	if f.node("a") == nil || f.node("b") == nil || f.node("z") == nil {
		t.Error("a Node was deleted instead of its NodeClaim, or the protected node")
	}
	if f.count("delete_nodeclaim", "success") != 2 || f.count("delete_node", "success") != 1 {
		t.Errorf("delete_nodeclaim success = %v, delete_node success = %v, want 2 and 1 (c has no NodeClaim that names it)",
			f.count("delete_nodeclaim", "success"), f.count("delete_node", "success"))
	}
}

// claimNames: a NodeClaim is a node's only when its status says so.
func TestClaimNames(t *testing.T) {
	n := func(name, id string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: id}}
	}
	cases := []struct {
		name  string
		claim *unstructured.Unstructured
		node  *corev1.Node
		want  bool
	}{
		{"node name, no provider IDs", claim("c", "a", ""), n("a", ""), true},
		{"provider ID, not registered yet", claim("c", "", "aws:///1"), n("a", "aws:///1"), true},
		{"both", claim("c", "a", "aws:///1"), n("a", "aws:///1"), true},
		{"a reused name, another instance", claim("c", "a", "aws:///1"), n("a", "aws:///2"), false},
		{"same instance, another name", claim("c", "b", "aws:///1"), n("a", "aws:///1"), false},
		{"provider ID on the node only", claim("c", "a", ""), n("a", "aws:///1"), false},
		{"provider ID on the claim only", claim("c", "a", "aws:///1"), n("a", ""), false},
		{"names nothing", claim("c", "", ""), n("a", ""), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := claimNames(tc.claim, tc.node); got != tc.want {
				t.Errorf("claimNames = %v, want %v", got, tc.want)
			}
		})
	}
}

// Without a usable NodeClaim API (absent, forbidden) the Node is deleted;
// any other error waits for the next scan and deletes nothing.
func TestNodeClaimAPITrouble(t *testing.T) {
	gr := schema.GroupResource{Group: NodeClaims.Group, Resource: NodeClaims.Resource}
	cases := []struct {
		name        string
		err         error
		wantDeleted bool
	}{
		{"absent", apierrors.NewNotFound(gr, ""), true},
		{"forbidden", apierrors.NewForbidden(gr, "", errBoom), true},
		{"unavailable", apierrors.NewServiceUnavailable("try later"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, PolicyReplace, []*corev1.Node{node("n", time.Hour, taint(startup))})
			f.c.cfg.NodeClaims = true
			fail(f.dyn, "list", "nodeclaims", tc.err)
			f.scan(f.cached("n")...)
			if deleted := f.node("n") == nil; deleted != tc.wantDeleted {
				t.Fatalf("node deleted %v, want %v", deleted, tc.wantDeleted)
			}
			if !tc.wantDeleted && (len(f.patches()) != 0 || f.count("delete_node", "error") != 1) {
				t.Errorf("patches %d, delete_node error %v: want no mark and one error", len(f.patches()), f.count("delete_node", "error"))
			}
		})
	}
}

// A scan whose cache has not seen this controller's mark yet (the watch
// lags the write) finds the mark on the fresh read: the retry waits for
// the stall time as it would on an up-to-date cache, it is not hurried by
// the lag.
func TestStaleCacheDoesNotHurryARetry(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("stuck", time.Hour, taint(startup))}, claim("claim-stuck", "stuck", ""))
	f.c.cfg.NodeClaims = true
	unmarked := f.cached("stuck")
	f.scan(unmarked...)
	if len(f.deletes()) != 1 || f.node("stuck") == nil {
		t.Fatalf("first scan: deletes %v, node present %v; want the NodeClaim deleted, the node kept", f.deletes(), f.node("stuck") != nil)
	}
	f.clock.Step(f.c.cfg.Interval)
	f.scan(unmarked...)
	if d := f.deletes(); len(d) != 0 || f.node("stuck") == nil {
		t.Errorf("a scan of the lagging cache an interval later deleted %v: the retry did not wait for --remediation-stall-after", d)
	}
	f.clock.Step(f.c.cfg.StallAfter)
	f.scan(unmarked...)
	if f.node("stuck") != nil {
		t.Error("not retried once stalled")
	}
}
