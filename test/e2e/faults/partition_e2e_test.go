//go:build e2e

package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// unreachable reports whether the node lifecycle controller gave up on n:
// Ready Unknown and the unreachable taint.
func unreachable(n *corev1.Node) bool {
	unknown := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			unknown = cond.Status == corev1.ConditionUnknown
		}
	}
	return unknown && taintedUnreachable(n)
}

// taintedUnreachable reports whether n carries an unreachable taint.
func taintedUnreachable(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable })
}

// testPodNetworkCut: a node whose pods lose the pod network while the node
// stays Ready (and its pods still reach the API server) is re-tainted after
// the threshold, alone (the fleet budget, 1 of 3 nodes, holds, and the
// other nodes, whose checks reach their other peers, are not the node's
// fault), and untainted once the network is back.
func testPodNetworkCut(t *testing.T, taints *taintLog) {
	ctx := t.Context()
	victim := nodeWithoutDNS(t)
	pod := agentPod(t, victim, 30*time.Second)
	adds := func() float64 {
		return mustMetric(t, pod, "node_ready_taint_operations_total", `operation="add"`, `result="success"`)
	}
	addsBefore := adds()
	mark := time.Now()
	if err := victim.PartitionPods(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.HealPods(context.Background()) })
	node := c.WaitNode(t, victim.Name, time.Minute, "re-tainted", func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == unhealthyKey })
	})
	took := time.Since(mark)
	figure(t, "pod network cut -> node re-tainted", took)
	// The first failing round runs up to a period after the cut, the
	// threshold's last one (threshold-1) periods later.
	if least := time.Duration(retaintThreshold-1) * checkPeriod * 9 / 10; took < least {
		t.Errorf("re-tainted %s after the cut, before %d rounds (at least %s)", took, retaintThreshold, least)
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
			t.Errorf("node %s not Ready with only its pod network cut: %s %s", victim.Name, cond.Status, cond.Message)
		}
	}
	if node.Labels[verifiedLabel] != "false" {
		t.Errorf("re-tainted node labelled %s=%q, want false", verifiedLabel, node.Labels[verifiedLabel])
	}
	// The agent counts its patch when the answer reaches it, which can be
	// after the test's watch delivered the taint: wait for the count, then
	// require exactly one.
	harness.Eventually(t, 10*time.Second, "the agent's successful re-taint counted", func() (bool, string) {
		got := adds()
		return got != addsBefore, fmt.Sprintf("%v successful re-taints", got-addsBefore)
	})
	if got := adds(); got != addsBefore+1 {
		t.Errorf("agent on %s: %v successful re-taints during the cut, want 1", victim.Name, got-addsBefore)
	}
	// The others, which reach their other peers, run a threshold of rounds
	// more with the cut in place.
	waitRoundsEverywhere(t, retaintThreshold+1, victim)
	taints.assertNoRetaint(t, mark, victim.Name)

	healed := time.Now()
	if err := victim.HealPods(ctx); err != nil {
		t.Fatal(err)
	}
	waitVerified(t, time.Minute, victim)
	figure(t, "pod network back -> node untainted", time.Since(healed))
	waitRoundsEverywhere(t, retaintThreshold+1, nil)
	taints.assertNoRetaint(t, healed)
}

// testAPIServerCut: a node cut off from the API server for longer than the
// re-taint window and kube-controller-manager's grace period. Its agent
// cannot act and does not count the rounds (a control-plane fault is not
// the node's); kube-controller-manager marks the node Unknown and taints it
// unreachable; reconnected, the node is Ready and untainted again, still
// verified, and takes a new pod, with no operator action.
func testAPIServerCut(t *testing.T, taints *taintLog) {
	ctx := t.Context()
	victim := c.Nodes[0]
	pod := agentPod(t, victim, 30*time.Second)
	skipped := func() float64 { return mustMetric(t, pod, "node_ready_rounds_skipped_total") }
	skippedBefore := skipped()
	mark := time.Now()
	if err := victim.CutAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.ReconnectAPIServer(context.Background()) })

	// While cut off: rounds go on, and each is skipped, not counted: as
	// many as would re-taint the node if they counted.
	harness.Eventually(t, time.Minute, "rounds skipped on the cut-off node", func() (bool, string) {
		s := skipped() - skippedBefore
		return s >= retaintThreshold, fmt.Sprintf("%v rounds skipped", s)
	})
	figure(t, "API server cut -> agent skipped a threshold of rounds", time.Since(mark))
	if f, err := metric(pod, "node_ready_consecutive_failures"); err != nil || f != 0 {
		t.Errorf("cut-off agent: node_ready_consecutive_failures %v, %v; want 0 (rounds it cannot act on do not count)", f, err)
	}
	c.WaitNode(t, victim.Name, gracePeriod+30*time.Second, "Unknown and tainted unreachable", unreachable)
	figure(t, "API server cut -> kube-controller-manager taints the node unreachable", time.Since(mark))

	back := time.Now()
	if err := victim.ReconnectAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	c.WaitNode(t, victim.Name, time.Minute, "Ready and no longer tainted unreachable", func(n *corev1.Node) bool {
		return !unreachable(n) && !taintedUnreachable(n)
	})
	nodeReady(t, victim, time.Minute)
	figure(t, "reconnected -> node Ready without the unreachable taint", time.Since(back))
	usable(t, victim)
	figure(t, "reconnected -> a new pod runs on the node", time.Since(back))
	// The agent acts again: a threshold of rounds that count, no taint.
	harness.Eventually(t, time.Minute, "api check passing again on "+victim.Name, func() (bool, string) {
		v, err := metric(pod, "node_check_success", `check="api"`)
		return err == nil && v == 1, fmt.Sprintf("node_check_success{check=api} %v, %v", v, err)
	})
	figure(t, "reconnected -> agent's api check passes", time.Since(back))
	// The connections the cut left behind stalled (unacknowledged, past a
	// retransmission timeout): the agent dropped them rather than wait on
	// them after the path healed. A live connection to a slow server is kept
	// (test/e2e/agent TestFrozenAPIServerKeepsLiveConnections).
	if logs := c.KubectlT(t, "", "logs", "-n", namespace, pod.Name); !strings.Contains(logs, "dropped connections to the API server") {
		t.Errorf("agent %s did not drop its stalled connections during the cut; its log:\n%s", pod.Name, logs)
	}
	waitRounds(t, retaintThreshold+1, pod)
	taints.assertNoRetaint(t, mark)
	waitVerified(t, 10*time.Second, victim)
	// The agent tolerates the unreachable NoExecute taint: not evicted.
	if after := agentPod(t, victim, 10*time.Second); after.UID != pod.UID {
		t.Errorf("agent pod on %s replaced during the cut: %s -> %s", victim.Name, pod.UID, after.UID)
	}
}

// usable schedules a pod that tolerates nothing onto node and waits until
// it runs: the node takes work again.
func usable(t *testing.T, node *harness.RealNode) {
	t.Helper()
	ctx := t.Context()
	pods := c.Client.CoreV1().Pods("default")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "usable-"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node.Name},
			Containers: []corev1.Container{{
				Name: "pause", Image: "registry.k8s.io/pause:3.10.1", ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
	pod, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) })
	harness.Eventually(t, time.Minute, "pod "+pod.Name+" running on "+node.Name, func() (bool, string) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	})
}
