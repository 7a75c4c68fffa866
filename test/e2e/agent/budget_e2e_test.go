//go:build e2e

package agent_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// retaintLease is the Lease the agents serialize re-taints with.
const retaintLease = "kube-node-ready-retaint"

// TestBypassFreesItsBudgetSlot: with a fleet budget of one node, a
// re-tainted node that an operator bypasses gives its slot back: the next
// failing node is re-tainted, not suppressed.
func TestBypassFreesItsBudgetSlot(t *testing.T) {
	first, second := cp.NewNode(t, "bypass-slot-0", harness.NodeOptions{}), cp.NewNode(t, "bypass-slot-1", harness.NodeOptions{})
	resolv := map[string]string{first.Name: ownResolvConf(t), second.Name: ownResolvConf(t)}
	agents := map[string]*agent{}
	for _, n := range []harness.Node{first, second} {
		agents[n.Name] = startAgent(t, n, "--check.dns.resolv-conf="+resolv[n.Name], "--fleet-budget=1")
	}
	for _, n := range []harness.Node{first, second} {
		cp.WaitNode(t, n.Name, 20*time.Second, "verified", verified)
	}
	breakDNS(t, resolv[first.Name])
	cp.WaitNode(t, first.Name, 20*time.Second, "re-tainted", func(n *corev1.Node) bool {
		return hasTaint(n, unhealthyTaint) && n.Labels["node-ready/verified"] == "false"
	})
	cp.KubectlT(t, "", "annotate", "node", first.Name, "node-ready/skip-verification=true")
	cp.WaitNode(t, first.Name, 10*time.Second, "untainted, verified=false removed", func(n *corev1.Node) bool {
		_, labelled := n.Labels["node-ready/verified"]
		return !tainted(n) && !labelled
	})
	breakDNS(t, resolv[second.Name])
	cp.WaitNode(t, second.Name, 20*time.Second, "re-tainted: the bypassed node holds no slot", func(n *corev1.Node) bool {
		return hasTaint(n, unhealthyTaint)
	})
	if got := agents[second.Name].Metric(t, "node_ready_retaint_suppressed_total"); got != 0 {
		t.Errorf("%v re-taints of %s suppressed by the fleet budget", got, second.Name)
	}
}

// TestRetaintLeaseLeftByAGoneAgent: the re-taint Lease was left held by an
// agent that went away, written with its clock a century ahead and an
// absurd duration. A node whose checks keep failing says that its re-taint
// waits (metric, Event), and is re-tainted within a bounded time: the 15 s
// the agent watches an unchanged record, plus a round.
func TestRetaintLeaseLeftByAGoneAgent(t *testing.T) {
	leases := cp.Client.CoordinationV1().Leases(harness.AgentNamespace)
	if err := leases.Delete(t.Context(), retaintLease, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	ahead := metav1.NewMicroTime(time.Now().AddDate(100, 0, 0))
	_, err := leases.Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: retaintLease, Namespace: harness.AgentNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("gone-node"), LeaseDurationSeconds: ptr.To[int32](math.MaxInt32),
			AcquireTime: &ahead, RenewTime: &ahead,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leases.Delete(context.Background(), retaintLease, metav1.DeleteOptions{}) })

	n := cp.NewNode(t, "lease-gone", harness.NodeOptions{})
	resolv := ownResolvConf(t)
	a := startAgent(t, n, "--check.dns.resolv-conf="+resolv, "--fleet-budget=100%")
	cp.WaitNode(t, n.Name, 20*time.Second, "verified", verified)
	breakDNS(t, resolv)
	harness.Eventually(t, 20*time.Second, "a re-taint waiting for the Lease is counted", func() (bool, string) {
		got, err := a.TryMetric("node_ready_retaint_deferred_total", `reason="lease_held"`)
		return err == nil && got > 0, fmt.Sprintf("node_ready_retaint_deferred_total{reason=\"lease_held\"} = %v (err %v)", got, err)
	})
	cp.WaitEvent(t, 10*time.Second, "Node", n.Name, api.EventRetaintDeferred, "")
	if !logContains(a.Process, "another agent holds the re-taint lease") {
		t.Error("agent did not log that its re-taint waits for the lease")
	}
	cp.WaitNode(t, n.Name, 25*time.Second, "re-tainted despite the Lease left behind", func(n *corev1.Node) bool {
		return hasTaint(n, unhealthyTaint)
	})
	if got := logCount(a.Process, "another agent holds the re-taint lease"); got != 1 {
		t.Errorf("logged the wait %d times, want once per episode", got)
	}
}
