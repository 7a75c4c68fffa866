//go:build e2e

package karpenter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
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

// watchNodeGone watches the node and returns a wait for it to be deleted,
// which returns the resourceVersion of its deletion (an etcd revision,
// comparable with those of the pods' events on the same store).
func (e *env) watchNodeGone(t *testing.T, node string) func(timeout time.Duration) int64 {
	t.Helper()
	w, err := e.cp.Client.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return func(timeout time.Duration) int64 {
		t.Helper()
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch of node %s closed", node)
				}
				if n, isNode := ev.Object.(*corev1.Node); isNode && ev.Type == watch.Deleted {
					return rv(n.ResourceVersion)
				}
			case <-timer.C:
				t.Fatalf("node %s not gone within %s", node, timeout)
			}
		}
	}
}

// podLog follows the pods of one app through a single watch, so that what
// it counts is the order the API server wrote, not what polls caught.
type podLog struct {
	mu    sync.Mutex
	want  int
	pods  map[string]*podTrack
	armed bool
	min   int
	minRV int64
}

// podTrack is what the watch saw of one pod.
type podTrack struct {
	node string
	// ready: Ready and not being deleted, what a PDB counts as healthy;
	// readyRV is the first event where it was.
	ready   bool
	readyRV int64
	// terminating: seen with a deletionTimestamp (graceful deletion)
	// before it went.
	terminating bool
	// evicted: carried the DisruptionTarget condition the Eviction API
	// sets (reason EvictionByEvictionAPI).
	evicted   bool
	deletedRV int64
}

// watchPods starts the watch of the pods labelled app=name; the count of
// available pods is followed from the moment it first reaches want.
func (e *env) watchPods(t *testing.T, name string, want int) *podLog {
	t.Helper()
	w, err := e.cp.Client.CoreV1().Pods("default").Watch(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &podLog{want: want, pods: map[string]*podTrack{}}
	go func() {
		for ev := range w.ResultChan() {
			l.see(ev)
		}
	}()
	harness.Eventually(t, 30*time.Second, "the watch of "+name+" sees its pods available", func() (bool, string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.armed, ""
	})
	return l
}

func (l *podLog) see(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tr := l.pods[p.Name]
	if tr == nil {
		tr = &podTrack{}
		l.pods[p.Name] = tr
	}
	at := rv(p.ResourceVersion)
	tr.node = p.Spec.NodeName
	if p.DeletionTimestamp != nil && ev.Type != watch.Deleted {
		tr.terminating = true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			tr.evicted = true
		}
	}
	tr.ready = ev.Type != watch.Deleted && p.DeletionTimestamp == nil && podReady(p)
	if tr.ready && tr.readyRV == 0 {
		tr.readyRV = at
	}
	if ev.Type == watch.Deleted {
		tr.deletedRV = at
	}
	n := l.countLocked()
	switch {
	case !l.armed && n >= l.want:
		l.armed, l.min, l.minRV = true, n, at
	case l.armed && n < l.min:
		l.min, l.minRV = n, at
	}
}

func (l *podLog) countLocked() int {
	n := 0
	for _, tr := range l.pods {
		if tr.ready {
			n++
		}
	}
	return n
}

// available is how many pods are available now.
func (l *podLog) available() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.countLocked()
}

// low is the fewest pods available since the count first reached want,
// and the resourceVersion where it did.
func (l *podLog) low() (int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.min, l.minRV
}

// track is a copy of what the watch saw of pod name (nil: nothing).
func (l *podLog) track(name string) *podTrack {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tr := l.pods[name]; tr != nil {
		c := *tr
		return &c
	}
	return nil
}

// firstReadyElsewhere is the resourceVersion at which the first pod on
// another node than node became Ready (0: none did).
func (l *podLog) firstReadyElsewhere(node string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first int64
	for _, tr := range l.pods {
		if tr.node != node && tr.readyRV != 0 && (first == 0 || tr.readyRV < first) {
			first = tr.readyRV
		}
	}
	return first
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func podNodes(pods []corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		out[p.Name] = p.Spec.NodeName
	}
	return out
}

func rv(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// heal makes the probe answer 200 again.
func (h *health) heal() { h.failing.Store(false) }

// auditLog is the API server's audit log: every request's answer.
type auditLog []auditEntry

// auditEntry is the part of an audit event read here.
type auditEntry struct {
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// component names the client of a request by its user agent's program
// ("karpenter", "kwok", "kube-controller-manager", ...): every component
// but our webhook and agents uses the admin's credentials here.
func (a auditEntry) component() string {
	name, _, _ := strings.Cut(a.UserAgent, "/")
	return name
}

// evictionCount sorts the eviction requests of some pods.
type evictionCount struct {
	// granted: Karpenter's, answered 201; refused: Karpenter's, answered
	// 429 (the PDB allows no disruption now); late: Karpenter's, for a pod
	// already gone (404, 409: a stale cache); others: anything else.
	granted, refused, late, others int
}

func (c evictionCount) String() string {
	return fmt.Sprintf("%d granted, %d refused (429), %d late, %d other", c.granted, c.refused, c.late, c.others)
}

func (l auditLog) evictions(pods ...string) evictionCount {
	var c evictionCount
	for _, a := range l {
		if a.Verb != "create" || a.ObjectRef.Resource != "pods" || a.ObjectRef.Subresource != "eviction" || !slices.Contains(pods, a.ObjectRef.Name) {
			continue
		}
		switch {
		case a.component() == "karpenter" && a.ResponseStatus.Code == 201:
			c.granted++
		case a.component() == "karpenter" && a.ResponseStatus.Code == 429:
			c.refused++
		case a.component() == "karpenter" && (a.ResponseStatus.Code == 404 || a.ResponseStatus.Code == 409):
			c.late++
		default:
			c.others++
		}
	}
	return c
}

// podDeletes counts the successful deletes of the pods by component.
func (l auditLog) podDeletes(pods ...string) map[string]int {
	by := map[string]int{}
	for _, a := range l {
		if a.Verb == "delete" && a.ObjectRef.Resource == "pods" && a.ObjectRef.Subresource == "" && slices.Contains(pods, a.ObjectRef.Name) && a.ResponseStatus.Code < 300 {
			by[a.component()]++
		}
	}
	return by
}

// deleteOf is when component's first successful delete of the object
// name was received (zero: none).
func (l auditLog) deleteOf(component, name string) time.Time {
	for _, a := range l {
		if a.Verb == "delete" && a.ObjectRef.Subresource == "" && a.ObjectRef.Name == name && a.component() == component && a.ResponseStatus.Code < 300 {
			return a.Received
		}
	}
	return time.Time{}
}

// count is how many requests user sent with verb on the object.
func (l auditLog) count(user, verb, resource, name string) int {
	n := 0
	for _, a := range l {
		if a.User.Username == user && a.Verb == verb && a.ObjectRef.Resource == resource && a.ObjectRef.Subresource == "" && a.ObjectRef.Name == name {
			n++
		}
	}
	return n
}

// readAudit reads the audit log's answered requests.
func (e *env) readAudit(t *testing.T) auditLog {
	t.Helper()
	f, err := os.Open(e.cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out auditLog
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var a auditEntry
		if json.Unmarshal(sc.Bytes(), &a) == nil && a.Stage == "ResponseComplete" {
			out = append(out, a)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
