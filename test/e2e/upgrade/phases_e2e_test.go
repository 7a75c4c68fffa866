//go:build e2e

package upgrade

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/certs"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// upgrade: helm upgrade to the working tree while nodes are created; the
// cleanup the previous release started (and the receiver held) is carried
// on by the new one, which understands the previous release's finalizer,
// annotations, condition, Lease and CA.
func (e *env) upgrade(t *testing.T) {
	held := "replaced-by-previous"
	e.roll(t, "upgrade", e.newTag, "upgrade", release, e.newChart, "--namespace", namespace, "--values", e.newVals, "--wait", "--timeout", "3m")
	e.leaseHeldBy(t, e.newTag)
	e.caCarriedOver(t)
	for name, was := range e.conditions {
		cond, err := e.condition(t, name)
		if err != nil {
			t.Error(err)
			continue
		}
		if cond.LastTransitionTime.Equal(&was) {
			continue
		}
		// The previous release's agent runs its rounds until it stops, and
		// stops without --shutdown-delay: while its peers are replaced it
		// may fail a round before the new agent's pod exists on its node.
		// That is the previous release's doing; the new agent setting the
		// condition back to True is right. Any change to anything but True
		// seen once the new pod exists (to the second) is the new release's.
		started, ok := e.newAgentStarted(t, name)
		changes, restored := e.mon.conditionChanges(name, started)
		if ok && restored && cond.Status == corev1.ConditionTrue {
			t.Logf("node %s: condition %s changed by the previous release's agent before the new one's pod was created at %s, and set back; changes seen: %s",
				name, conditionType, started.Format("15:04:05"), changes)
			continue
		}
		t.Errorf("node %s: condition %s changed at %s by the new agents (the previous release set it at %s); changes seen: %s",
			name, conditionType, cond.LastTransitionTime, was, changes)
	}
	// The previous release's replacing mark on a node being deleted holds
	// the new one's --max-replacing slot.
	harness.Eventually(t, 30*time.Second, "the new release's leader counts "+held+" as being replaced", func() (bool, string) {
		v := e.webhookMetric(t, "node_remediation_replacing_nodes")
		return v == 1, fmt.Sprintf("node_remediation_replacing_nodes %v, want 1", v)
	})
	e.finishHeld(t, held, e.newTag)
	e.joinsAfterUpgrade(t)
	e.afterRoll(t, "after the upgrade")
}

// joinsAfterUpgrade: a real node that joins after the upgrade, its node
// group registering the startup taint as it did under the previous
// release, is verified by the new agent, which removes that key.
func (e *env) joinsAfterUpgrade(t *testing.T) {
	t.Helper()
	start := time.Now()
	rn, err := e.c.AddNode(t.Context(), harness.RealNodeOptions{Name: "joins-after-upgrade", Taints: []corev1.Taint{harness.StartupTaint}})
	if err != nil {
		t.Fatal(err)
	}
	e.c.WaitNode(t, rn.Name, 2*time.Minute, "verified by the new agent, the previous release's startup taint removed", func(n *corev1.Node) bool {
		return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return harness.OurTaint(t.Key) }) && n.Labels[verifiedLabel] == "true"
	})
	e.c.WaitEvent(t, 30*time.Second, "Node", rn.Name, api.EventNodeVerified, "startup taint "+harness.StartupTaint.ToString()+" removed")
	onNode := func(p corev1.Pod) bool {
		return p.Spec.NodeName == rn.Name && strings.HasSuffix(p.Spec.Containers[0].Image, ":"+e.newTag)
	}
	if pods, _, err := podsOf(t.Context(), e.c, agentApp, e.newTag); err != nil || !slices.ContainsFunc(pods, onNode) {
		t.Errorf("no agent pod on %s runs %s (err %v)", rn.Name, e.newTag, err)
	}
	t.Logf("a node joining with the startup taint %s after the upgrade verified by the new agent in %s", harness.StartupTaint.Key, time.Since(start).Round(time.Millisecond))
}

// rollback: helm rollback to the previous release, as safe: the cleanup the
// new release started is carried on by the previous one, and the node the
// new release re-tainted is recovered by the previous release's agent,
// which knows the key and does not check the fault (the roll waits until
// every real node is verified); doctor names no taint left behind.
func (e *env) rollback(t *testing.T) {
	held := "held-at-rollback"
	e.startHeld(t, held, e.newTag)
	e.roll(t, "rollback", e.prevTag, "rollback", release, "1", "--namespace", namespace, "--wait", "--timeout", "3m")
	e.leaseHeldBy(t, e.prevTag)
	e.finishHeld(t, held, e.prevTag)
	e.afterRoll(t, "after the rollback")
	e.nothingStranded(t, "after the rollback")
}

// imageOnlyUpgrade: the previous release's chart with the working tree's
// images, as a user who only bumps the image tags (or applies older plain
// manifests) runs them: the new binaries take the previous chart's flags
// and work as before.
func (e *env) imageOnlyUpgrade(t *testing.T) {
	e.roll(t, "image-only-upgrade", e.newTag, "upgrade", release, e.prev.Chart, "--namespace", namespace, "--values", e.prevVals,
		"--set", "agent.image.tag="+e.newTag, "--set", "webhook.image.tag="+e.newTag, "--wait", "--timeout", "3m")
	e.leaseHeldBy(t, e.newTag)
	e.afterRoll(t, "after the image-only upgrade")
}

// roll runs helm with args while the creator adds nodes, and waits until
// every pod runs tag and every real node is verified: the time to settle.
func (e *env) roll(t *testing.T, what, tag string, args ...string) {
	t.Helper()
	cr := &creator{c: e.c, prefix: "during-" + what}
	var settled time.Duration
	cr.during(t, e.mon, func() {
		start := time.Now()
		e.helm(t, args...)
		helmTook := time.Since(start)
		harness.Eventually(t, 3*time.Minute, "every pod on "+tag+" and every real node verified", func() (bool, string) {
			rolled, msg := rolledTo(t.Context(), e.c, tag)
			ok, vmsg := e.verified(t.Context())
			return rolled && ok, msg + "; " + vmsg
		})
		settled = time.Since(start)
		t.Logf("%s: helm returned after %s; settled (every pod on %s, every real node verified) after %s",
			what, helmTook.Round(time.Millisecond), tag, settled.Round(time.Millisecond))
	})
	e.cleanupCompletes(t, "after-"+what, tag)
}

// startHeld deletes a new node whose cleanup the receiver refuses, and waits
// until a webhook pod running tag has tried it and written its status.
func (e *env) startHeld(t *testing.T, name, tag string) {
	t.Helper()
	e.rcv.hold(name)
	if _, err := e.c.CreateNode(t.Context(), name, simulated()); err != nil {
		t.Fatal(err)
	}
	e.c.WaitNode(t, name, 30*time.Second, "finalizer added", func(n *corev1.Node) bool { return slices.Contains(n.Finalizers, finalizer) })
	if err := e.c.Client.CoreV1().Nodes().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refusedFrom(t, name, tag)
	// The status is written as the attempt ends, after the POST.
	n := e.c.WaitNode(t, name, 30*time.Second, "cleanup status written", func(n *corev1.Node) bool {
		return n.Annotations[statusAnnotation] != ""
	})
	e.statusReadable(t, n)
}

// refusedFrom waits until a webhook pod running tag has posted node's
// document (and been refused): that release works on the node's cleanup.
func (e *env) refusedFrom(t *testing.T, node, tag string) {
	t.Helper()
	harness.Eventually(t, 90*time.Second, "a webhook pod on "+tag+" tried "+node+"'s cleanup", func() (bool, string) {
		ips := podIPsOn(t, e.c, tag)
		for _, h := range e.rcv.hitsOf(node) {
			if !h.accepted && slices.Contains(ips, h.from) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("hits %+v, pods on %s: %v", e.rcv.hitsOf(node), tag, ips)
	})
}

// finishHeld lets the receiver accept the held node once the release on tag
// has tried it, and checks that release completes the cleanup.
func (e *env) finishHeld(t *testing.T, node, tag string) {
	t.Helper()
	e.refusedFrom(t, node, tag)
	e.rcv.release(node)
	e.gone(t, node, tag)
}

// statusReadable checks that this tree's reader (api.ParseCleanupStatus,
// which kubectl node-ready shows) reads the cleanup status annotation on n,
// whichever release wrote it.
func (e *env) statusReadable(t *testing.T, n *corev1.Node) {
	t.Helper()
	v, ok := n.Annotations[statusAnnotation]
	if !ok {
		t.Fatalf("node %s being cleaned up has no %s annotation: %v", n.Name, statusAnnotation, n.Annotations)
	}
	if _, err := api.ParseCleanupStatus(v); err != nil {
		t.Errorf("node %s: %s %q unreadable: %v", n.Name, statusAnnotation, v, err)
	}
}

// caCarriedOver: the new release took the previous one's CA over (its
// Secret holds it, the caBundle still trusts it), so the webhook pods of
// both releases were trusted through the roll.
func (e *env) caCarriedOver(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	harness.Eventually(t, 30*time.Second, "the new release's Secret holds the previous CA", func() (bool, string) {
		sec, err := e.c.Client.CoreV1().Secrets(namespace).Get(ctx, webhookName+"-certs", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return bytes.Equal(sec.Data[certs.SecretCACert], e.caCert), fmt.Sprintf("ca.crt of %d bytes, previous %d", len(sec.Data[certs.SecretCACert]), len(e.caCert))
	})
	m, err := e.c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil || len(m.Webhooks) == 0 {
		t.Fatalf("webhook configuration: %v", err)
	}
	if !bytes.Contains(m.Webhooks[0].ClientConfig.CABundle, bytes.TrimSpace(e.caCert)) {
		t.Errorf("caBundle after the upgrade no longer trusts the previous release's CA")
	}
}

// webhookMetric is the largest value of name across the webhook pods (the
// leader's; the others report none or zero).
func (e *env) webhookMetric(t *testing.T, name string) float64 {
	t.Helper()
	pods, _, err := podsOf(t.Context(), e.c, webhookApp, "")
	if err != nil {
		t.Fatal(err)
	}
	var max float64
	var errs []string
	for _, p := range pods {
		v, err := harness.ScrapeMetric("http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(harness.MetricsPort))+"/metrics", name)
		if err != nil {
			errs = append(errs, err.Error())
		}
		max = math.Max(max, v)
	}
	if len(errs) == len(pods) {
		t.Fatalf("%s from the webhook pods: %s", name, strings.Join(errs, "; "))
	}
	return max
}

// afterRoll: two check periods after the roll settled (every agent ran two
// more rounds), no node gained a taint of ours or lost its label, and no
// agent emitted NodeRetainted.
func (e *env) afterRoll(t *testing.T, when string) {
	t.Helper()
	waitRounds(t, e.c)
	e.mon.check(t, when)
	noRetaintEvents(t, e.c.Client, e.mon, when)
}

// newAgentStarted is when the first pod of the new release's agent on node
// was created, to the second, if there is one: no new agent can write the
// condition before it, whatever its containers did since (the chart's
// DaemonSet rolls with maxUnavailable, so the old pod is gone by then).
func (e *env) newAgentStarted(t *testing.T, node string) (time.Time, bool) {
	t.Helper()
	pods, _, err := podsOf(t.Context(), e.c, agentApp, e.newTag)
	if err != nil {
		t.Errorf("agent pods: %v", err)
		return time.Time{}, false
	}
	var first time.Time
	for _, p := range pods {
		if p.Spec.NodeName != node || !strings.HasSuffix(p.Spec.Containers[0].Image, ":"+e.newTag) {
			continue
		}
		if created := p.CreationTimestamp.Time; first.IsZero() || created.Before(first) {
			first = created
		}
	}
	return first, !first.IsZero()
}
