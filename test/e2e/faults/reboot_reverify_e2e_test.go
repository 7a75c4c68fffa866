//go:build e2e

package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestRebootReverify: with agent.reverifyAfterReboot, a node rebooted
// (switched off and on: a new boot ID, its old verified label kept) is held
// with the startup taint until it verifies again. With its DNS broken it
// stays held, round after round, its condition saying why, and is never
// re-tainted; with its DNS fine it is released by the first round of its
// new agent, the new boot ID recorded. No other node gets a taint of ours.
func TestRebootReverify(t *testing.T) {
	ctx := t.Context()
	installReverify(t)
	taints := watchTaints(t)
	for _, n := range c.Nodes {
		c.WaitNode(t, n.Name, time.Minute, "its boot ID recorded", func(node *corev1.Node) bool {
			return node.Status.NodeInfo.BootID != "" && recorded(node) == node.Status.NodeInfo.BootID
		})
	}
	victim := nodeWithoutDNS(t)
	log := watchNode(t, victim.Name)

	ok := t.Run("dns-broken-stays-held", func(t *testing.T) {
		mark := time.Now()
		if err := victim.BreakDNS(ctx); err != nil {
			t.Fatal(err)
		}
		broken := true
		defer func() {
			if broken {
				if err := victim.FixDNS(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
		oldBoot := reboot(t, victim)
		held := c.WaitNode(t, victim.Name, 2*time.Minute, "held with the startup taint", func(n *corev1.Node) bool { return isHeld(n) })
		pod := agentRunning(t, victim, mark)
		// Past the re-taint threshold (held rounds run the bootstrap set on
		// the start-up backoff, each failing one waiting for its checks'
		// timeouts: counted in steps).
		for range 2 {
			waitRounds(t, (retaintThreshold+1)/2, pod)
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !isHeld(n) {
			t.Fatalf("node %s after %d rounds with its DNS broken: taints %v, label %q; want still held", victim.Name, 2*((retaintThreshold+1)/2), ours(n), n.Labels[verifiedLabel])
		}
		cond := condition(n)
		m, _ := api.ParseConditionMessage(cond.Message)
		if cond.Reason != api.ReasonRebooted || !slices.Contains(m.Failing, "dns") || m.Boot != oldBoot {
			t.Errorf("condition %s %q: want %s naming dns, the boot verified under still %s", cond.Reason, cond.Message, api.ReasonRebooted, oldBoot)
		}
		if notes := c.EventNotes(t, "Node", victim.Name, api.EventNodeHeldAfterReboot); len(notes) == 0 {
			t.Errorf("no %s Event", api.EventNodeHeldAfterReboot)
		}
		taints.assertNoRetaint(t, mark, victim.Name)
		if got := log.retainted(); got {
			t.Errorf("node %s re-tainted while held", victim.Name)
		}
		t.Logf("held node %s: %v, condition %q", held.Name, ours(n), cond.Message)
		fixed := time.Now()
		if err := victim.FixDNS(ctx); err != nil {
			t.Fatal(err)
		}
		broken = false
		waitVerified(t, time.Minute, victim)
		figure(t, "DNS fixed -> held node released", time.Since(fixed))
		n = c.WaitNode(t, victim.Name, 30*time.Second, "the new boot ID recorded", func(n *corev1.Node) bool {
			return recorded(n) == n.Status.NodeInfo.BootID
		})
		if n.Status.NodeInfo.BootID == oldBoot {
			t.Errorf("boot ID %s unchanged by the reboot", oldBoot)
		}
	})

	if !ok {
		t.Fatal("the node must be verified again before the next reboot")
	}
	t.Run("dns-fine-released-in-one-round", func(t *testing.T) {
		waitVerified(t, time.Minute, victim)
		mark := time.Now()
		log.reset()
		reboot(t, victim)
		pod := agentRunning(t, victim, mark)
		// The node still carries its old label when the agent starts: wait
		// for the hold and the release, in that order, not for the label.
		harness.Eventually(t, 2*time.Minute, "node "+victim.Name+" held and released", func() (bool, string) {
			held, release := log.holdAndRelease()
			return !held.IsZero() && !release.IsZero(), log.seenString()
		})
		waitVerified(t, 10*time.Second, victim)
		released := time.Now()
		var r float64
		harness.Eventually(t, 30*time.Second, "the new agent's rounds", func() (bool, string) {
			var err error
			r, err = rounds(pod)
			return err == nil, fmt.Sprint(err)
		})
		held, release := log.holdAndRelease()
		if held.IsZero() || release.IsZero() {
			t.Fatalf("the node was not seen held and released: %s", log.seenString())
		}
		if n := log.failedHeldRounds(); n > 0 {
			t.Errorf("a held round failed (%d versions of the node with condition %s): want released by the first round: %s", n, api.ReasonRebooted, log.seenString())
		}
		started := pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		figure(t, "agent start -> node held", held.Sub(started))
		figure(t, "agent start -> node released", release.Sub(started))
		figure(t, "held -> released", release.Sub(held))
		t.Logf("figure: rounds of the new agent when the release was seen: %v (released seen at +%s)", r, released.Sub(started).Round(100*time.Millisecond))
		taints.assertNoRetaint(t, mark, victim.Name)
	})
}

// installReverify installs (or upgrades) the chart as install does, with
// agent.reverifyAfterReboot, and waits until every node is verified.
func installReverify(t *testing.T) {
	v, err := c.LocalImageValues(fmt.Sprintf("checkPeriod: %s\nretaintThreshold: %d\nrecoverThreshold: 2\nnetwork: {peerRefresh: 10s}\nreverifyAfterReboot: true",
		checkPeriod, retaintThreshold), "")
	if err != nil {
		t.Fatal(err)
	}
	vals := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vals, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Helm(t.Context(), "upgrade", "--install", harness.ChartRelease, chart, "--namespace", namespace, "--create-namespace",
		"--values", vals, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	waitVerified(t, 2*time.Minute, c.Nodes...)
	t.Logf("helm upgrade --install -> every node verified in %s", time.Since(start).Round(time.Millisecond))
}

// reboot switches node off and on again and returns the boot ID it ran
// under before.
func reboot(t *testing.T, node *harness.RealNode) string {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Stop(); err != nil {
		t.Fatal(err)
	}
	on := time.Now()
	if err := node.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	figure(t, "switch on -> node Ready", time.Since(on))
	return n.Status.NodeInfo.BootID
}

// agentRunning is the agent pod on node whose container started after since.
func agentRunning(t *testing.T, node *harness.RealNode, since time.Time) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	harness.Eventually(t, 2*time.Minute, "agent on "+node.Name+" running again", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{
			LabelSelector: "app=kube-node-ready", FieldSelector: "spec.nodeName=" + node.Name,
		})
		if err != nil {
			return false, err.Error()
		}
		for i, p := range pods.Items {
			if len(p.Status.ContainerStatuses) == 0 || p.Status.PodIP == "" {
				continue
			}
			if s := p.Status.ContainerStatuses[0].State.Running; s != nil && s.StartedAt.After(since.Add(-time.Second)) {
				pod = &pods.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d agent pods, none started again", len(pods.Items))
	})
	return pod
}

// isHeld: the startup taint with verified=false, no unhealthy taint.
func isHeld(n *corev1.Node) bool {
	return n.Labels[verifiedLabel] == "false" && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == harness.StartupTaint.Key }) &&
		!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == unhealthyKey })
}

// condition is the agent's condition on n.
func condition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == agent.ConditionType {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// recorded is the boot ID the agent's condition records on n.
func recorded(n *corev1.Node) string {
	m, err := api.ParseConditionMessage(condition(n).Message)
	if err != nil {
		return ""
	}
	return m.Boot
}

// nodeLog records, from a watch, every version of one node as the test
// cares for it: held or not, re-tainted or not, the condition's reason.
type nodeLog struct {
	mu   sync.Mutex
	seen []nodeSeen
}

type nodeSeen struct {
	at        time.Time
	held      bool
	retainted bool
	reason    string
}

func watchNode(t *testing.T, name string) *nodeLog {
	t.Helper()
	l := &nodeLog{}
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	record := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Name != name {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seen = append(l.seen, nodeSeen{at: time.Now(), held: isHeld(n),
			retainted: slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == unhealthyKey }), reason: condition(n).Reason})
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("node informer did not sync")
	}
	return l
}

func (l *nodeLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = nil
}

func (l *nodeLog) retainted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.seen, func(s nodeSeen) bool { return s.retainted })
}

// holdAndRelease are when the node was first seen held and then first seen
// not held again.
func (l *nodeLog) holdAndRelease() (held, released time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.seen {
		switch {
		case held.IsZero() && s.held:
			held = s.at
		case !held.IsZero() && !s.held:
			return held, s.at
		}
	}
	return held, time.Time{}
}

// failedHeldRounds counts the versions of the node whose condition says a
// held round failed (the condition of a held round that passes is never
// written: the release comes first).
func (l *nodeLog) failedHeldRounds() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.seen {
		if s.reason == api.ReasonRebooted {
			n++
		}
	}
	return n
}

func (l *nodeLog) seenString() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, s := range l.seen {
		fmt.Fprintf(&b, "%s held=%v retainted=%v reason=%s; ", s.at.Format("15:04:05.000"), s.held, s.retainted, s.reason)
	}
	return b.String()
}
