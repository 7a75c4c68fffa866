//go:build e2e

package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// monitor watches every Node for the whole test and records each breach of
// what an upgrade or a rollback must never do: a node gaining a taint of
// ours, a verified label flipping, a node released (gone) before its
// critical hook plugin reached the receiver. A watch, not a poll: no change
// between two samples goes unseen.
type monitor struct {
	rcv *receiver

	mu         sync.Mutex
	violations []string
	// deleted are the nodes seen gone, with when.
	deleted map[string]time.Time
	// finalized are the nodes seen with our finalizer.
	finalized map[string]bool
	// releases counts the releases checked, so the test can say the check ran.
	releases int
	// conditions are the changes of our condition's status seen per node,
	// with reason and message, to say why a condition changed.
	conditions map[string][]conditionChange
	// exempt are nodes the test re-taints on purpose: their taints, label
	// and NodeRetainted Events are not violations.
	exempt map[string]bool
}

// exemptNode stops checking node's taints, label and re-taint Events.
func (m *monitor) exemptNode(node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.exempt[node] = true
}

func (m *monitor) exempted(node string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exempt[node]
}

// conditionChange is one change of our condition's status on a node, as the
// watch delivered it.
type conditionChange struct {
	at     time.Time
	status corev1.ConditionStatus
	text   string
}

// startMonitor starts watching nodes until ctx ends; it returns once the
// watch has listed every node.
func startMonitor(ctx context.Context, t *testing.T, client kubernetes.Interface, rcv *receiver) *monitor {
	t.Helper()
	m := &monitor{rcv: rcv, deleted: map[string]time.Time{}, finalized: map[string]bool{}, conditions: map[string][]conditionChange{}, exempt: map[string]bool{}}
	f := informers.NewSharedInformerFactory(client, 0)
	inf := f.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				m.seen(n)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 {
				m.updated(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				m.gone(n)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("node watch did not sync")
	}
	return m
}

func (m *monitor) violate(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violations = append(m.violations, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

// updated checks one change of a node.
func (m *monitor) updated(o, n *corev1.Node) {
	m.seen(n)
	if n.DeletionTimestamp != nil && slices.Contains(o.Finalizers, finalizer) && !slices.Contains(n.Finalizers, finalizer) {
		m.released(n.Name)
	}
	for _, t := range n.Spec.Taints {
		if m.exempted(n.Name) {
			break
		}
		if harness.OurTaint(t.Key) && !hasTaint(o, t.Key) {
			m.violate("node %s gained the taint %s (taints %v)", n.Name, t.Key, n.Spec.Taints)
		}
	}
	if was, ok := o.Labels[verifiedLabel]; ok && n.Labels[verifiedLabel] != was && !m.exempted(n.Name) {
		m.violate("node %s: label %s flipped from %q to %q", n.Name, verifiedLabel, was, n.Labels[verifiedLabel])
	}
	if c, ok := ourCondition(n); ok {
		if was, _ := ourCondition(o); was.Status != c.Status {
			m.mu.Lock()
			now := time.Now()
			m.conditions[n.Name] = append(m.conditions[n.Name], conditionChange{at: now, status: c.Status, text: fmt.Sprintf("%s %s (%s: %s)",
				now.Format("15:04:05.000"), c.Status, c.Reason, c.Message)})
			m.mu.Unlock()
		}
	}
}

// conditionChanges returns the changes of node's condition status seen so
// far, and whether none seen at or after since is a change to anything but
// True.
func (m *monitor) conditionChanges(node string, since time.Time) (changes string, onlyBeforeOrRestored bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var texts []string
	onlyBeforeOrRestored = true
	for _, c := range m.conditions[node] {
		texts = append(texts, c.text)
		if !c.at.Before(since) && c.status != corev1.ConditionTrue {
			onlyBeforeOrRestored = false
		}
	}
	return strings.Join(texts, "; "), onlyBeforeOrRestored
}

func ourCondition(n *corev1.Node) (corev1.NodeCondition, bool) {
	for _, c := range n.Status.Conditions {
		if c.Type == conditionType {
			return c, true
		}
	}
	return corev1.NodeCondition{}, false
}

// released checks that a node was released (its finalizer removed) only
// after its critical plugin reached the receiver.
func (m *monitor) released(node string) {
	m.mu.Lock()
	m.releases++
	m.mu.Unlock()
	if now := time.Now(); !m.rcv.acceptedBefore(node, now) {
		m.violate("node %s released without its critical hook plugin reaching the receiver (hits %+v)", node, m.rcv.hitsOf(node))
	}
}

// seen notes a node that carries our finalizer.
func (m *monitor) seen(n *corev1.Node) {
	if slices.Contains(n.Finalizers, finalizer) {
		m.mu.Lock()
		m.finalized[n.Name] = true
		m.mu.Unlock()
	}
}

// gone records when a node went. A node that carried our finalizer was
// released by its removal at the latest now (the API server may delete the
// node in the same write that removes the last finalizer).
func (m *monitor) gone(n *corev1.Node) {
	m.mu.Lock()
	m.deleted[n.Name] = time.Now()
	had := m.finalized[n.Name]
	m.mu.Unlock()
	if had || slices.Contains(n.Finalizers, finalizer) {
		m.released(n.Name)
	}
}

// goneAt reports when node was seen gone.
func (m *monitor) goneAt(node string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.deleted[node]
	return at, ok
}

// check fails the test with every violation recorded so far.
func (m *monitor) check(t *testing.T, when string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("%s: the node watch checked %d node releases by a cleanup so far", when, m.releases)
	if len(m.violations) > 0 {
		t.Errorf("%s: %d violation(s):\n%s", when, len(m.violations), strings.Join(m.violations, "\n"))
		m.violations = nil
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// noRetaintEvents fails the test if any agent ever emitted NodeRetainted
// about a node the monitor m does not exempt.
func noRetaintEvents(t *testing.T, client kubernetes.Interface, m *monitor, when string) {
	t.Helper()
	evs, err := client.CoreV1().Events(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{FieldSelector: "reason=NodeRetainted"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if m.exempted(e.InvolvedObject.Name) {
			continue
		}
		t.Errorf("%s: NodeRetainted Event on %s at %s: %s", when, e.InvolvedObject.Name, e.CreationTimestamp.Format(time.RFC3339), e.Message)
	}
}
