//go:build e2e

package faults_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// kubeletBack waits until the node's kubelet renewed its Lease after since:
// the kubelet (re)started and talks to the API server.
func kubeletBack(t *testing.T, node *harness.RealNode, since time.Time) {
	t.Helper()
	harness.Eventually(t, time.Minute, "kubelet of "+node.Name+" renews its Lease", func() (bool, string) {
		l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil {
			return false, "never renewed"
		}
		return l.Spec.RenewTime.After(since), "last renewed " + l.Spec.RenewTime.Format(time.RFC3339Nano)
	})
}

// nodeReady waits until the node's Ready condition is True.
func nodeReady(t *testing.T, node *harness.RealNode, timeout time.Duration) {
	t.Helper()
	c.WaitNode(t, node.Name, timeout, "Ready", func(n *corev1.Node) bool {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	})
}

// restarts is the agent container's restart count in pod.
func restarts(pod *corev1.Pod) int32 {
	for _, s := range pod.Status.ContainerStatuses {
		return s.RestartCount
	}
	return 0
}

// testKubeletRestart: the kubelet of a node restarted leaves the agent
// running and the node verified: no node is tainted while the agents run
// a threshold of rounds more.
func testKubeletRestart(t *testing.T, taints *taintLog) {
	victim := c.Nodes[0]
	before := agentPod(t, victim, 30*time.Second)
	mark := time.Now()
	if err := victim.RestartKubelet(); err != nil {
		t.Fatal(err)
	}
	kubeletBack(t, victim, mark)
	figure(t, "kubelet restart -> kubelet renews its Lease", time.Since(mark))
	nodeReady(t, victim, time.Minute)
	figure(t, "kubelet restart -> node Ready", time.Since(mark))
	waitRoundsEverywhere(t, retaintThreshold+1, nil)
	taints.assertNoRetaint(t, mark)
	waitVerified(t, 10*time.Second, victim)
	if after := agentPod(t, victim, 10*time.Second); after.UID != before.UID || restarts(after) != restarts(before) {
		t.Errorf("agent on %s restarted by a kubelet restart: pod %s restarts %d -> pod %s restarts %d",
			victim.Name, before.UID, restarts(before), after.UID, restarts(after))
	}
}

// testContainerdRestart: containerd killed (SIGKILL) and started again
// leaves the containers running and the node verified.
func testContainerdRestart(t *testing.T, taints *taintLog) {
	ctx := t.Context()
	victim := c.Nodes[1]
	before := agentPod(t, victim, 30*time.Second)
	mark := time.Now()
	if err := victim.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	figure(t, "containerd SIGKILL -> containerd answers again", time.Since(mark))
	nodeReady(t, victim, time.Minute)
	waitRoundsEverywhere(t, retaintThreshold+1, nil)
	figure(t, "containerd SIGKILL -> node Ready and every agent ran a threshold of rounds", time.Since(mark))
	taints.assertNoRetaint(t, mark)
	waitVerified(t, 10*time.Second, victim)
	if after := agentPod(t, victim, 10*time.Second); restarts(after) != restarts(before) {
		t.Logf("agent on %s restarted with containerd: restarts %d -> %d", victim.Name, restarts(before), restarts(after))
	}
}

// testAgentKilled: the agent's process killed with SIGKILL (as the OOM
// killer does) is restarted by the kubelet; the new process, on a verified
// node, keeps it verified.
func testAgentKilled(t *testing.T, taints *taintLog) {
	ctx := t.Context()
	victim := c.Nodes[2]
	before := agentPod(t, victim, 30*time.Second)
	mark := time.Now()
	if err := victim.KillContainer(ctx, before.Status.ContainerStatuses[0].ContainerID); err != nil {
		t.Fatal(err)
	}
	var after *corev1.Pod
	harness.Eventually(t, time.Minute, "agent on "+victim.Name+" restarted and Ready", func() (bool, string) {
		after = agentPod(t, victim, 30*time.Second)
		return restarts(after) > restarts(before), fmt.Sprintf("restarts %d", restarts(after))
	})
	figure(t, "agent SIGKILL -> new agent container Ready", time.Since(mark))
	if term := after.Status.ContainerStatuses[0].LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
		t.Errorf("agent's last termination %+v, want exit code 137 (SIGKILL)", term)
	}
	waitRounds(t, retaintThreshold+1, after)
	taints.assertNoRetaint(t, mark)
	waitVerified(t, 10*time.Second, victim)
	if n, err := metric(after, "node_ready_verified"); err != nil || n != 1 {
		t.Errorf("restarted agent: node_ready_verified %v, %v; want 1", n, err)
	}
}

// testReboot: a node switched off (every process of it ends, its network
// namespace goes away) until kube-controller-manager taints it
// unreachable, while the others run on, then switched on with the same
// name, is verified again without a taint of ours, and no other node is
// tainted meanwhile.
func testReboot(t *testing.T, taints *taintLog) {
	ctx := t.Context()
	victim := nodeWithoutDNS(t)
	before := agentPod(t, victim, 30*time.Second)
	mark := time.Now()
	if err := victim.Stop(); err != nil {
		t.Fatal(err)
	}
	figure(t, "switch off (every process of the node stopped)", time.Since(mark))
	// Off until kube-controller-manager has given up on it, and the other
	// agents ran a threshold of rounds with one peer gone.
	c.WaitNode(t, victim.Name, gracePeriod+30*time.Second, "Unknown and tainted unreachable", unreachable)
	figure(t, "switch off -> kube-controller-manager taints the node unreachable", time.Since(mark))
	waitRoundsEverywhere(t, retaintThreshold+1, victim)
	taints.assertNoRetaint(t, mark)
	on := time.Now()
	t.Logf("node %s off for %s", victim.Name, on.Sub(mark).Round(100*time.Millisecond))
	if err := victim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	kubeletBack(t, victim, on)
	figure(t, "switch on -> kubelet renews its Lease", time.Since(on))
	c.WaitNode(t, victim.Name, time.Minute, "no longer tainted unreachable", func(n *corev1.Node) bool { return !taintedUnreachable(n) })
	nodeReady(t, victim, time.Minute)
	figure(t, "switch on -> node Ready without the unreachable taint", time.Since(on))
	var after *corev1.Pod
	harness.Eventually(t, time.Minute, "agent on "+victim.Name+" running again", func() (bool, string) {
		after = agentPod(t, victim, time.Minute)
		s := after.Status.ContainerStatuses[0]
		return s.State.Running != nil && s.State.Running.StartedAt.After(mark.Add(-time.Second)), fmt.Sprintf("state %+v", s.State)
	})
	figure(t, "switch on -> agent Ready", time.Since(on))
	waitRounds(t, retaintThreshold+1, after)
	waitVerified(t, 10*time.Second, victim)
	taints.assertNoRetaint(t, mark)
	t.Logf("agent pod %s (restarts %d) -> %s (restarts %d)", before.UID, restarts(before), after.UID, restarts(after))
}
