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
	"k8s.io/client-go/kubernetes"

	agentpkg "github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/kubeconfig"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestEventsCountRepeatsIntoOneSeries: with the agent's own credentials and
// the chart's RBAC, the agent's Event recorder (client-go's events
// broadcaster) turns repeats of an Event into one Event whose series a PATCH
// writes, the first repeat at once and no more writes for the next; a Node
// re-created under the same name (a new UID) gets an Event of its own.
func TestEventsCountRepeatsIntoOneSeries(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	const name = "events-series"
	first := createBareNode(t, name)
	// After the node: the token carries the node its pod is bound to.
	client := agentClientset(t, name)
	rec := startRecorder(t, client)
	since := time.Now()
	// One occurrence, then, once its Event exists, two repeats: the
	// broadcaster writes concurrently, so a repeat sent at once could race
	// its own create.
	record(rec, first)
	harness.Eventually(t, 10*time.Second, "the Event created", func() (bool, string) {
		evs := nodeEvents(t, first)
		return len(evs) == 1, describeEvents(evs)
	})
	record(rec, first)
	record(rec, first)

	var ev eventsv1.Event
	harness.Eventually(t, 10*time.Second, "the Event's series written", func() (bool, string) {
		evs := nodeEvents(t, first)
		if len(evs) != 1 {
			return false, fmt.Sprintf("%d Events regarding %s, want 1: %v", len(evs), name, describeEvents(evs))
		}
		ev = evs[0]
		return ev.Series != nil && ev.Series.Count >= 2, describeEvents(evs)
	})
	if ev.Regarding.UID != first.UID || ev.Reason != "VerificationFailed" || ev.ReportingController != "kube-node-ready-agent" || ev.Series.LastObservedTime.IsZero() {
		t.Errorf("Event %s: regarding %s reason %s controller %s series %+v, want %s VerificationFailed kube-node-ready-agent and a last observed time",
			ev.Name, ev.Regarding.UID, ev.Reason, ev.ReportingController, ev.Series, first.UID)
	}
	var writes []string
	creates, patches := 0, 0
	for _, r := range agentRequests(t, name, since) {
		if strings.Contains(r, "/apis/events.k8s.io/v1/namespaces/default/events") {
			writes = append(writes, r)
			creates += boolInt(strings.HasPrefix(r, "create "))
			patches += boolInt(strings.HasPrefix(r, "patch "))
		}
	}
	// The third occurrence is only counted: the broadcaster writes a series
	// again at its refresh (30 minutes) or once it ends (6 minutes unseen).
	if creates != 1 || patches != 1 {
		t.Errorf("%d Event creates and %d patches, want 1 create and 1 patch (the first repeat):\n%s", creates, patches, strings.Join(writes, "\n"))
	}

	deleteNode(t, name)
	second := createBareNode(t, name)
	if second.UID == first.UID {
		t.Fatalf("re-created node kept UID %s", first.UID)
	}
	record(rec, second)
	harness.Eventually(t, 10*time.Second, "an Event regarding the re-created node", func() (bool, string) {
		evs := nodeEvents(t, second)
		return len(evs) == 1 && eventCount(evs[0]) == 1, describeEvents(evs)
	})
	if evs := nodeEvents(t, first); len(evs) != 1 || eventCount(evs[0]) < 2 {
		t.Errorf("Events regarding the deleted node: %v, want the one series", describeEvents(evs))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// agentClientset is a clientset with the agent ServiceAccount's token bound
// to a pod on node, so the writes are held to the chart's RBAC.
func agentClientset(t *testing.T, node string) kubernetes.Interface {
	t.Helper()
	cfg, err := kubeconfig.Load(nodeKubeconfig(t, agentSA, harness.Node{Name: node}), "events-e2e")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// startRecorder starts the agent's Event recorder on client, stopped when
// the test ends.
func startRecorder(t *testing.T, client kubernetes.Interface) agentpkg.Recorder {
	t.Helper()
	r, stop, err := agentpkg.StartEventRecorder(t.Context(), client, "kube-node-ready-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return r
}

// record records the test's Event regarding node.
func record(r agentpkg.Recorder, node *corev1.Node) {
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	r.Eventf(ref, corev1.EventTypeWarning, "VerificationFailed", "Verify", "checks failed: %s", "dns")
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
