//go:build e2e

package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/kube"
	"github.com/kube-node-ready/kube-node-ready/internal/kubeconfig"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestEventsCountRepeatsIntoOneSeries: with the agent's own credentials and
// the chart's RBAC, the Recorder turns 50 repeats of an Event into one Event
// whose series counts them all, written a bounded number of times; a Node
// re-created under the same name (a new UID) gets an Event of its own.
func TestEventsCountRepeatsIntoOneSeries(t *testing.T) {
	const (
		name     = "events-series"
		repeats  = 50
		interval = 200 * time.Millisecond
	)
	first := createBareNode(t, name)
	// After the node: the token carries the node its pod is bound to.
	client := agentClient(t, name)
	since := time.Now()
	start := time.Now()
	recordRepeats(t, client, first, interval, repeats, 20*time.Millisecond)
	elapsed := time.Since(start)

	evs := nodeEvents(t, first)
	if len(evs) != 1 {
		t.Fatalf("%d Events regarding %s, want 1: %v", len(evs), name, describeEvents(evs))
	}
	ev := evs[0]
	if ev.Regarding.UID != first.UID || ev.Reason != "VerificationFailed" || ev.ReportingController != "kube-node-ready-agent" {
		t.Errorf("Event %s: regarding %s reason %s controller %s, want %s VerificationFailed kube-node-ready-agent",
			ev.Name, ev.Regarding.UID, ev.Reason, ev.ReportingController, first.UID)
	}
	if ev.Series == nil || ev.Series.Count != repeats || ev.Series.LastObservedTime.IsZero() {
		t.Errorf("Event %s series %+v, want count %d and a last observed time", ev.Name, ev.Series, repeats)
	}
	// One create, the prompt first repeat, one write per interval and the
	// flush on Close.
	var writes []string
	creates := 0
	for _, r := range agentRequests(t, name, since) {
		if strings.Contains(r, "/apis/events.k8s.io/v1/namespaces/default/events") {
			writes = append(writes, r)
			if strings.HasPrefix(r, "create ") {
				creates++
			}
		}
	}
	t.Logf("%d Event writes for %d repeats over %s", len(writes), repeats, elapsed.Round(time.Millisecond))
	if limit := 3 + int(elapsed/interval); len(writes) > limit || len(writes) < 3 {
		t.Errorf("%d Event writes for %d repeats over %s, want 3 to %d:\n%s", len(writes), repeats, elapsed.Round(time.Millisecond), limit, strings.Join(writes, "\n"))
	}
	if creates != 1 {
		t.Errorf("%d Event creates, want 1 and patches for the repeats:\n%s", creates, strings.Join(writes, "\n"))
	}

	deleteNode(t, name)
	second := createBareNode(t, name)
	if second.UID == first.UID {
		t.Fatalf("re-created node kept UID %s", first.UID)
	}
	recordRepeats(t, client, second, interval, 1, 0)
	if evs := nodeEvents(t, first); len(evs) != 1 || eventCount(evs[0]) != repeats {
		t.Errorf("Events regarding the deleted node: %v, want the one counting %d", describeEvents(evs), repeats)
	}
	if evs := nodeEvents(t, second); len(evs) != 1 || eventCount(evs[0]) != 1 {
		t.Errorf("Events regarding the re-created node: %v, want one new Event", describeEvents(evs))
	}
}

// agentClient is a kube.Client with the agent ServiceAccount's token bound
// to a pod on node, so the writes are held to the chart's RBAC.
func agentClient(t *testing.T, node string) *kube.Client {
	t.Helper()
	cfg, err := kubeconfig.Load(nodeKubeconfig(t, agentSA, harness.Node{Name: node}), "events-e2e")
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recordRepeats records the same Event on node n times, every gap, then closes the
// Recorder so everything it holds is written.
func recordRepeats(t *testing.T, client *kube.Client, node *corev1.Node, interval time.Duration, n int, gap time.Duration) {
	t.Helper()
	r := &kube.Recorder{Client: client, Controller: "kube-node-ready-agent", Instance: node.Name, SeriesInterval: interval}
	done := make(chan struct{})
	go func() { defer close(done); r.Run(t.Context()) }()
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	for range n {
		r.Eventf(ref, corev1.EventTypeWarning, "VerificationFailed", "Verify", "checks failed: %s", "dns")
		time.Sleep(gap) // pacing the repeats, as rounds would
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r.Close(ctx)
	<-done
	if d := r.Dropped(); d != 0 {
		t.Errorf("%d Events dropped", d)
	}
}

// createBareNode creates a Node with nothing but a name, deleted when the
// test ends; no agent runs for it.
func createBareNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			t.Errorf("delete node %s: %v", name, err)
		}
	})
	return n
}

func deleteNode(t *testing.T, name string) {
	t.Helper()
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Nodes carry no finalizers here, but wait rather than assume.
	cp.WaitNodeGone(t, name, 10*time.Second)
}

// nodeEvents lists the events.k8s.io/v1 Events regarding node, this
// incarnation of it only: Events outlive their Node for an hour.
func nodeEvents(t *testing.T, node *corev1.Node) []eventsv1.Event {
	t.Helper()
	var out []eventsv1.Event
	for _, e := range cp.Events(t, "Node", node.Name) {
		if e.Regarding.UID == node.UID {
			out = append(out, e)
		}
	}
	return out
}

func eventCount(e eventsv1.Event) int32 {
	if e.Series == nil {
		return 1
	}
	return e.Series.Count
}

func describeEvents(evs []eventsv1.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s uid=%s reason=%s count=%d", e.Name, e.Regarding.UID, e.Reason, eventCount(e)))
	}
	return strings.Join(out, "; ")
}
