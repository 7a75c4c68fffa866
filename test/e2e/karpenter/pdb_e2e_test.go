//go:build e2e

package karpenter

import (
	"context"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// pdbProbeAddr is the HTTP endpoint the pdb pool's agents probe.
const pdbProbeAddr = "10.213.0.33:9000"

// appGrace is the terminationGracePeriodSeconds of the test's workload
// pods: not zero, so an eviction is a graceful deletion (the pod is seen
// Terminating, then KWOK, in the kubelet's place, removes it).
const appGrace = 5

// tgp is the terminationGracePeriod of the pool whose pod no eviction may
// ever move.
const tgp = 30 * time.Second

// TestKarpenterPDB is R1's NodeClaim path with the real Karpenter and real
// PodDisruptionBudgets: an environment of its own, whose API server writes
// an audit log (who asked for which eviction and delete, and what it was
// answered) and with kube-controller-manager running only the deployment,
// replicaset and disruption controllers (Deployments make pods, and a PDB
// gets the status the Eviction API judges by; the node lifecycle
// controller stays off, as KWOK's nodes send no heartbeat).
func TestKarpenterPDB(t *testing.T) {
	e := newEnv(t, harness.Options{AuditLog: true})
	if _, err := e.cp.StartControllerManager("deployment", "replicaset", "disruption"); err != nil {
		t.Fatal(err)
	}
	t.Run("DrainWithinPDB", func(t *testing.T) { t.Parallel(); e.testDrainWithinPDB(t) })
	t.Run("BlockingPDBHoldsUntilTerminationGracePeriod", func(t *testing.T) { t.Parallel(); e.testBlockingPDB(t) })
	t.Run("BareNodeDeleteBypassesThePDB", func(t *testing.T) { t.Parallel(); e.testBareNodeDelete(t) })
}

// A re-tainted node that serves: two replicas of a Deployment on it under a
// PDB of minAvailable 1. Its checks fail, its agent re-taints it, and at
// --unverified-deadline our remediation (--remediation-replace-retainted)
// deletes its NodeClaim, and only that. Karpenter drains the node through
// the Eviction API: it asks for both pods at once; the API server grants
// one and refuses the other (429) until the first one's replacement is
// Ready on a new node; then it grants it. A watch on the pods sees never
// fewer than one available, both old pods evicted (the API server's
// DisruptionTarget condition) and terminating gracefully, none deleted by
// Karpenter or by us; the Node goes after its pods, and our finalizer's
// cleanup ran once. The probe heals once the NodeClaim is deleted, so that
// the replacement node verifies (every agent of the pool probes the same
// endpoint); the old node's drain does not depend on it.
func (e *env) testDrainWithinPDB(t *testing.T) {
	const pool, app = "pdb", "pdb-app"
	probe := &health{}
	harness.ServeHTTP(t, pdbProbeAddr, probe)
	e.pool(t, pool, harness.NodePoolOptions{StartupTaints: []corev1.Taint{ourTaint}},
		[]string{"--checks=api,probe", "--check.probe.targets=http://" + pdbProbeAddr + "/healthz", "--check-period=1s", "--retaint-threshold=2", "--fleet-budget=2"})
	e.app(t, app, pool, 2, 1)
	old := e.appPods(t, app)
	if len(old) != 2 || old[0].Spec.NodeName != old[1].Spec.NodeName {
		t.Fatalf("want both pods of %s on one node, got %v", app, podNodes(old))
	}
	node := old[0].Spec.NodeName
	claim := e.claimOf(t, pool, node)
	pods := e.watchPods(t, app, 2)
	gone := e.watchNodeGone(t, node)
	replaced := e.w.Metric(t, "node_remediation_actions_total", `action="delete_nodeclaim"`, `result="success"`)
	nodeDeletes := e.w.Metric(t, "node_remediation_actions_total", `action="delete_node"`)

	probe.fail()
	e.cp.WaitNode(t, node, time.Minute, "re-tainted by its agent", func(n *corev1.Node) bool {
		return hasTaint(n, harness.UnhealthyTaint.Key) && n.Labels[api.VerifiedLabel] == "false"
	})
	harness.Eventually(t, deadline+30*time.Second, "our remediation deletes the NodeClaim "+claim, func() (bool, string) {
		return e.w.Metric(t, "node_remediation_actions_total", `action="delete_nodeclaim"`, `result="success"`) > replaced, ""
	})
	probe.heal()
	start := time.Now()
	nodeRV := gone(3 * time.Minute)
	drained := time.Since(start)
	harness.Eventually(t, time.Minute, "two pods of "+app+" available again", func() (bool, string) {
		n := pods.available()
		return n == 2, strconv.Itoa(n) + " available"
	})

	// Within the PDB: never fewer than minAvailable; every old pod evicted
	// through the Eviction API, gracefully; the node gone after its pods.
	low, lowRV := pods.low()
	if low < 1 {
		t.Errorf("%d pods of %s available at resourceVersion %d, below the PDB's minAvailable 1", low, app, lowRV)
	}
	for _, p := range old {
		tr := pods.track(p.Name)
		switch {
		case tr == nil || tr.deletedRV == 0:
			t.Fatalf("pod %s on the drained node never went", p.Name)
		case !tr.evicted:
			t.Errorf("pod %s went without the Eviction API's DisruptionTarget condition", p.Name)
		case !tr.terminating:
			t.Errorf("pod %s was deleted without a graceful termination", p.Name)
		case tr.deletedRV > nodeRV:
			t.Errorf("node %s went (resourceVersion %d) before its pod %s (%d)", node, nodeRV, p.Name, tr.deletedRV)
		}
	}
	// The second eviction waited for a replacement that was Ready elsewhere.
	last := max(pods.track(old[0].Name).deletedRV, pods.track(old[1].Name).deletedRV)
	firstReady := pods.firstReadyElsewhere(node)
	if firstReady == 0 || firstReady > last {
		t.Errorf("the last old pod went (resourceVersion %d) before any replacement was Ready elsewhere (%d)", last, firstReady)
	}

	// Who asked: Karpenter's evictions, answered by the API server; no
	// delete of the pods but KWOK's (the kubelet's final removal of a pod
	// already terminating); our webhook deleted the NodeClaim and no Node.
	audit := e.readAudit(t)
	ev := audit.evictions(podNames(old)...)
	if ev.granted != 2 {
		t.Errorf("%d evictions of the old pods granted, want 2 (one each): %s", ev.granted, ev)
	}
	if ev.refused < 1 {
		t.Errorf("no eviction refused by the PDB (429): the drain did not wait for it: %s", ev)
	}
	if ev.others != 0 {
		t.Errorf("evictions answered with other codes or asked by others than Karpenter: %s", ev)
	}
	if by := audit.podDeletes(podNames(old)...); len(by) != 1 || by["kwok"] == 0 {
		t.Errorf("deletes of the old pods by %v, want only KWOK's two (the kubelet's part)", by)
	}
	webhook := "system:serviceaccount:" + ns + ":" + harness.WebhookServiceAccount
	if n := audit.count(webhook, "delete", "nodeclaims", claim); n != 1 {
		t.Errorf("our webhook sent %d deletes of NodeClaim %s, want 1", n, claim)
	}
	if n := audit.count(webhook, "delete", "nodes", node); n != 0 {
		t.Errorf("our webhook sent %d deletes of Node %s, want 0", n, node)
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="delete_node"`); got != nodeDeletes {
		t.Errorf("our remediation deleted %v Nodes", got-nodeDeletes)
	}
	calls := e.hook.callsFor(node)
	if len(calls) != 1 {
		t.Fatalf("cleanup hook called %d times for %s, want 1", len(calls), node)
	}
	// Our cleanup runs when the Node's deletion begins, beside Karpenter's
	// drain, not after it: said here as a figure, not a rule.
	lastGone := audit.deleteOf("kwok", old[0].Name)
	if at := audit.deleteOf("kwok", old[1].Name); at.After(lastGone) {
		lastGone = at
	}
	t.Logf("figure: drain within a PDB: NodeClaim deleted by our remediation, node %s gone %s later; evictions %s; minimum available %d (minAvailable 1); our cleanup hook ran %s before the last old pod went",
		node, r(drained), ev, low, r(lastGone.Sub(calls[0])))
}

// A pod no eviction may ever move (one replica, minAvailable 1) on a node of
// a NodePool with terminationGracePeriod: its NodeClaim deleted, Karpenter
// asks for the eviction again and again and is refused (429) until the
// grace period is nearly over; then it deletes the pod itself (a graceful
// delete of the pod's own grace period, no eviction), and the node goes.
// Without terminationGracePeriod the node would wait for ever.
func (e *env) testBlockingPDB(t *testing.T) {
	const pool, app = "pdb-tgp", "pdb-held"
	e.pool(t, pool, harness.NodePoolOptions{StartupTaints: []corev1.Taint{ourTaint}, TerminationGracePeriod: tgp}, []string{})
	e.app(t, app, pool, 1, 1)
	old := e.appPods(t, app)
	node := old[0].Spec.NodeName
	claim := e.claimOf(t, pool, node)
	pods := e.watchPods(t, app, 1)
	gone := e.watchNodeGone(t, node)

	e.cp.KubectlT(t, "", "delete", "nodeclaim", claim, "--wait=false")
	nodeRV := gone(tgp + 2*time.Minute)
	tr := pods.track(old[0].Name)
	if tr == nil || tr.deletedRV == 0 {
		t.Fatalf("pod %s still there after its node went", old[0].Name)
	}
	if tr.evicted {
		t.Errorf("pod %s was evicted: its PDB allowed no disruption", old[0].Name)
	}
	if tr.deletedRV > nodeRV {
		t.Errorf("node %s went before its pod", node)
	}
	// Karpenter deletes the pod at terminationGracePeriod less the pod's
	// own grace period, so that it ends by then (the NodeClaim's deadline
	// is written in whole seconds: up to a second early).
	audit := e.readAudit(t)
	deleted := audit.deleteOf("karpenter", old[0].Name)
	held := deleted.Sub(audit.deleteOf("kubectl", claim))
	if want := tgp - appGrace*time.Second - time.Second; deleted.IsZero() || held < want {
		t.Errorf("Karpenter deleted pod %s %s after its NodeClaim's delete, want at least %s (terminationGracePeriod %s less the pod's %ds)", old[0].Name, held, want, tgp, appGrace)
	}
	ev := audit.evictions(old[0].Name)
	if ev.granted != 0 || ev.refused < 3 {
		t.Errorf("evictions of %s: %s; want none granted and Karpenter refused again and again", old[0].Name, ev)
	}
	by := audit.podDeletes(old[0].Name)
	if by["karpenter"] != 1 || len(by) != 2 || by["kwok"] == 0 {
		t.Errorf("deletes of %s by %v, want one by Karpenter at the grace period's end, then KWOK's (the kubelet's part)", old[0].Name, by)
	}
	if !tr.terminating {
		t.Errorf("pod %s was deleted without a graceful termination", old[0].Name)
	}
	// The PDB does not hold past terminationGracePeriod: the replacement
	// is made only once the pod is gone, so none is available in between.
	low, _ := pods.low()
	if low != 0 {
		t.Errorf("%d pods of %s available throughout: Karpenter's delete at terminationGracePeriod did not override the PDB, as docs/safety.md (R1) says it does", low, app)
	}
	t.Logf("figure: a PDB that allows no eviction: evictions %s over %s; then Karpenter deleted the pod (deletes by %v) at terminationGracePeriod %s; minimum available %d (minAvailable 1)",
		ev, r(held), by, tgp, low)
}

// The contrast, what remediation did before R1 with a node that has no
// NodeClaim: a bare Node delete. The node (KWOK's, no NodeClaim) runs two
// replicas under a PDB of minAvailable 1; deleting the Node asks no one:
// our cleanup runs and releases it, it is gone with both pods still bound
// to it, and not one eviction was asked for. (On a real cluster the
// instance is gone with it and pod garbage collection force-deletes the
// pods.)
func (e *env) testBareNodeDelete(t *testing.T) {
	const pool, app = "pdb-static", "pdb-static"
	n := e.cp.NewNode(t, "pdb-static-0", harness.NodeOptions{
		NoStartupTaint: true,
		Labels:         map[string]string{poolLabel: pool},
		Annotations:    map[string]string{"kwok.x-k8s.io/node": "fake"},
	})
	e.cp.WaitNode(t, n.Name, time.Minute, "Ready (KWOK)", func(n *corev1.Node) bool {
		return condition(n, string(corev1.NodeReady)) == corev1.ConditionTrue
	})
	e.app(t, app, pool, 2, 1)
	old := e.appPods(t, app)
	gone := e.watchNodeGone(t, n.Name)
	live := e.node(t, n.Name)
	if err := e.cp.Client.CoreV1().Nodes().Delete(t.Context(), n.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &live.UID, ResourceVersion: &live.ResourceVersion},
	}); err != nil {
		t.Fatal(err)
	}
	gone(time.Minute)
	left := 0
	for _, p := range old {
		if q := e.pod(t, p.Name); q != nil && q.Spec.NodeName == n.Name && q.DeletionTimestamp == nil {
			left++
		}
	}
	ev := e.readAudit(t).evictions(podNames(old)...)
	if left != 2 || ev != (evictionCount{}) {
		t.Errorf("after the bare delete of %s: %d of its 2 pods still bound to it, evictions %s; want 2 and none", n.Name, left, ev)
	}
	t.Logf("figure: bare Node delete: node gone with %d serving pods still bound to it, PDB minAvailable 1 never asked (evictions %s)", left, ev)
}

// app creates a PDB of minAvailable over the pods labelled app=name and a
// Deployment of replicas such pods on pool, and waits until they are all
// Ready and the PDB's status (the disruption controller's) counts them.
// When the test ends the Deployment, its ReplicaSets, its pods (at once:
// some may be bound to a node that is gone) and the PDB are deleted.
func (e *env) app(t *testing.T, name, pool string, replicas, minAvailable int32) {
	t.Helper()
	ctx, c := t.Context(), e.cp.Client
	labels := map[string]string{"app": name}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(minAvailable)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{poolLabel: pool},
					Containers: []corev1.Container{{
						Name: "app", Image: "registry.k8s.io/pause:3.10.1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](appGrace),
				},
			},
		},
	}
	if _, err := c.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, sel := context.Background(), metav1.ListOptions{LabelSelector: "app=" + name}
		for _, err := range []error{
			c.AppsV1().Deployments("default").Delete(ctx, name, metav1.DeleteOptions{}),
			c.AppsV1().ReplicaSets("default").DeleteCollection(ctx, metav1.DeleteOptions{}, sel),
			c.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, sel),
			c.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, name, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("remove %s: %v", name, err)
			}
		}
	})
	harness.Eventually(t, 2*time.Minute, name+": pods Ready and counted by its PDB", func() (bool, string) {
		ready := 0
		for _, p := range e.appPods(t, name) {
			if podReady(&p) {
				ready++
			}
		}
		got, err := c.PolicyV1().PodDisruptionBudgets("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := got.Status
		return ready == int(replicas) && s.ObservedGeneration == got.Generation && s.CurrentHealthy == replicas && s.DisruptionsAllowed == replicas-minAvailable,
			strconv.Itoa(ready) + " Ready, PDB currentHealthy " + strconv.Itoa(int(s.CurrentHealthy)) + ", disruptionsAllowed " + strconv.Itoa(int(s.DisruptionsAllowed))
	})
}

// appPods lists the pods labelled app=name that are not being deleted.
func (e *env) appPods(t *testing.T, name string) []corev1.Pod {
	t.Helper()
	list, err := e.cp.Client.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// claimOf is the name of pool's NodeClaim that launched node.
func (e *env) claimOf(t *testing.T, pool, node string) string {
	t.Helper()
	for _, c := range e.claims(t, pool) {
		if claimProviderNode(c) == node {
			return c.GetName()
		}
	}
	t.Fatalf("no NodeClaim of pool %s launched node %s", pool, node)
	return ""
}

// heal makes the probe answer 200 again.
func (h *health) heal() { h.failing.Store(false) }
