//go:build e2e

package remediation

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/e2e/agentkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// podOn creates a pod bound to node (no scheduler, no kubelet here: it stays
// Pending, as a pod the kubelet has not started yet), owned by owner when
// given, labelled app=name.
func (e *env) podOn(t *testing.T, name, node string, owner *metav1.OwnerReference) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app"}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	// No controller-manager here makes the namespace's default ServiceAccount.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := e.cp.Client.CoreV1().ServiceAccounts("default").Create(t.Context(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := e.cp.Client.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// daemonSetOwner creates a DaemonSet (no controller runs it here) and
// returns the owner reference its pods carry.
func (e *env) daemonSetOwner(t *testing.T, name string) *metav1.OwnerReference {
	t.Helper()
	labels := map[string]string{"app": name}
	ds, err := e.cp.Client.AppsV1().DaemonSets("default").Create(t.Context(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/agent"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)}
}

// R1: remediation never removes capacity that serves. With the opt-in for
// re-tainted nodes on and no NodeClaim API (every Cluster Autoscaler
// cluster), a node that verified once and runs a pod under a minAvailable: 1
// PodDisruptionBudget is only reported (there is no drain path), and a
// never-verified node that runs a pod other than a DaemonSet's is held on
// the fresh read. A never-verified node with only a DaemonSet pod is
// deleted: the positive signal the holds are anchored on. The pods are read
// from the real API server by its spec.nodeName field selector.
func TestCapacityThatServesIsNeverDeleted(t *testing.T) {
	e := start(t, false, []string{"webhook.remediation.policy=replace"}, "--remediation=replace", "--max-replacing=5",
		"--agent-fleet-budget=5", "--remediation-replace-retainted", "--remediation-breaker-threshold=off")
	e.retainted(t, "serving")
	e.podOn(t, "web-0", "serving", nil)
	if _, err := e.cp.Client.PolicyV1().PodDisruptionBudgets("default").Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-0"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.node(t, "busy", harness.NodeOptions{})
	e.podOn(t, "job-0", "busy", nil)
	ds := e.daemonSetOwner(t, "log-shipper")
	e.node(t, "empty", harness.NodeOptions{})
	e.podOn(t, "log-shipper-empty", "empty", ds)

	harness.WaitFor(t, 30*time.Second, "the never-verified node running only a DaemonSet pod replaced", func() bool { return !e.exists(t, "empty") })
	e.waitEvent(t, "serving", api.EventNodeUnverifiedPastDeadline, "no Karpenter NodeClaim to drain it through")
	e.waitEvent(t, "busy", api.EventNodeUnverifiedPastDeadline, "runs pods other than DaemonSet and mirror pods")
	e.scanned(t, 5, "further scans over the nodes that serve", e.stillThere(t, time.Now(), "serving", "busy"))
	for _, p := range []string{"web-0", "job-0"} {
		if _, err := e.cp.Client.CoreV1().Pods("default").Get(t.Context(), p, metav1.GetOptions{}); err != nil {
			t.Errorf("pod %s: %v, want it untouched", p, err)
		}
	}
	if got := e.w.Metric(t, "node_remediation_blocked_nodes", `reason="no_drain_path"`); got != 1 {
		t.Errorf("blocked{no_drain_path} = %v, want 1", got)
	}
	if got := e.w.Metric(t, "node_remediation_blocked_nodes", `reason="runs_workloads"`); got != 1 {
		t.Errorf("blocked{runs_workloads} = %v, want 1", got)
	}
	if got := e.w.Metric(t, "node_remediation_actions_total", `action="delete_node"`, `result="success"`); got != 1 {
		t.Errorf("delete_node successes = %v, want 1 (only the node running nothing but a DaemonSet pod)", got)
	}
}

// R2: a cluster-wide fault is never a node's fault, for remediation too.
// Six real agents verify their nodes, each of which has a NodeClaim; CoreDNS
// stops for many deadlines. The agents re-taint up to their fleet budget of
// 2 and no further; remediation, told to replace re-tainted nodes too, sees
// the budget used up (the candidates' own re-taints counted) and deletes no
// Node and no NodeClaim. When DNS is back every node verifies, none replaced
// while it recovers.
func TestClusterWideOutageReplacesNothing(t *testing.T) {
	const count, budget = 6, 2
	cp := harness.StartT(t, harness.Options{})
	if err := cp.InstallCRDs(t.Context(), "karpenter", "karpenter.sh_nodeclaims.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := cp.ApplyChartRBAC(t.Context(), ns, "webhook.remediation.policy=replace"); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cp: cp, dyn: dyn}
	kit := agentkit.Kit{CP: cp}
	agents := kit.StartFleet(t, "outage", count, fmt.Sprintf("--fleet-budget=%d", budget))
	var claims []string
	for _, a := range agents {
		cp.WaitNode(t, a.Node.Name, 30*time.Second, "verified", agentkit.Verified)
		claims = append(claims, e.nodeClaim(t, "claim-"+a.Node.Name, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.Node.Name}}, false).GetName())
	}
	// A deadline of 6 s, several times the nodes' recovery (2 passing 1 s
	// rounds) once DNS is back.
	e.startWebhook(t, "--remediation=replace", "--remediation-replace-retainted", fmt.Sprintf("--agent-fleet-budget=%d", budget),
		"--max-replacing=3", "--remediation-breaker-threshold=off", "--unverified-deadline=6s")

	nothingDeleted := func() (bool, string) {
		for _, a := range agents {
			if n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), a.Node.Name, metav1.GetOptions{}); err != nil || n.DeletionTimestamp != nil {
				return false, fmt.Sprintf("node %s deleted during the outage (%v)", a.Node.Name, err)
			}
		}
		for _, c := range claims {
			if !e.claimExists(t, c) {
				return false, "NodeClaim " + c + " deleted during the outage"
			}
		}
		return true, ""
	}
	if err := cp.StopDNS(); err != nil {
		t.Fatal(err)
	}
	dnsStopped := true
	t.Cleanup(func() {
		if dnsStopped {
			_ = cp.StartDNS(context.Background())
		}
	})
	harness.Eventually(t, 30*time.Second, "the agents re-tainted up to their budget", func() (bool, string) {
		if ok, why := nothingDeleted(); !ok {
			t.Fatal(why)
		}
		got := kit.Retainted(t)
		return got == budget, fmt.Sprintf("%d nodes re-tainted, want %d", got, budget)
	})
	// Several deadlines (6 s each, a scan every 300 ms) with the budget used up.
	e.scanned(t, 70, "scans through an outage of several deadlines", nothingDeleted)
	if got := e.w.Metric(t, "node_remediation_blocked_nodes", `reason="fleet_budget"`); got != budget {
		t.Errorf("blocked{fleet_budget} = %v, want %d (each re-tainted node held by the budget its own re-taint helps use up)", got, budget)
	}
	// The agents the budget refused said so on the re-taint Lease, under the
	// chart's RBAC, and the webhook read it under its own.
	lease, err := cp.Client.CoordinationV1().Leases(harness.AgentNamespace).Get(t.Context(), api.RetaintLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Annotations[api.FleetBudgetRefusedAnnotation]; got == "" {
		t.Errorf("Lease %s carries no %s after the budget refused re-taints", api.RetaintLease, api.FleetBudgetRefusedAnnotation)
	}
	if strings.Contains(e.log(t), "cannot read the agents' re-taint Lease") {
		t.Error("the webhook could not read the agents' re-taint Lease under the chart's RBAC")
	}
	if err := cp.StartDNS(t.Context()); err != nil {
		t.Fatal(err)
	}
	dnsStopped = false
	// The re-tainted nodes recover one by one: the first to recover frees a
	// budget slot while the other is still recovering, past the deadline it
	// ran up during the outage. It is not replaced: when the budget has room
	// again, every node's time restarts.
	for _, a := range agents {
		cp.WaitNode(t, a.Node.Name, 60*time.Second, "verified again after DNS returned", agentkit.Verified)
	}
	// The episode ends a deadline (6 s) after the last refusal of the budget
	// was seen on the Lease.
	harness.Eventually(t, 30*time.Second, "the webhook says every node's time restarted when the fleet budget had room again", func() (bool, string) {
		return strings.Contains(e.log(t), "fleet budget has room again after it was used up"), "not logged yet"
	})
	for _, action := range []string{"delete_node", "delete_nodeclaim"} {
		if got := e.w.Metric(t, "node_remediation_actions_total", `action="`+action+`"`); got != 0 {
			t.Errorf("%s actions = %v, want 0", action, got)
		}
	}
	for _, c := range claims {
		if !e.claimExists(t, c) {
			t.Errorf("NodeClaim %s deleted", c)
		}
	}
	if _, err := cp.Client.CoreV1().Nodes().Get(t.Context(), agents[0].Node.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("a node was deleted")
	}
}
