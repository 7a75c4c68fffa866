//go:build e2e

package upgrade

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// creator creates simulated Node objects one after another while a release
// rolls, as an autoscaler would: each CREATE must succeed (never denied)
// and the node must get the finalizer, from admission or from the back-fill;
// then it is deleted, so its cleanup runs through the roll too.
type creator struct {
	c      *harness.Cluster
	prefix string

	mu        sync.Mutex
	created   []string
	admission int // had the finalizer at the first read after CREATE
	backfill  int // got it later
	failures  []string
}

// finalizerWait bounds how long a node created during a roll may lack the
// finalizer: a leader change (the Lease expiring) delays the back-fill.
const finalizerWait = 45 * time.Second

// run creates nodes until ctx ends; it returns when the last one is handled.
func (cr *creator) run(ctx context.Context) {
	for i := 1; ctx.Err() == nil; i++ {
		cr.one(ctx, fmt.Sprintf("%s-%d", cr.prefix, i))
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (cr *creator) fail(format string, args ...any) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.failures = append(cr.failures, fmt.Sprintf(format, args...))
}

// one creates name, waits for its finalizer and deletes it. It uses its own
// context for the node's life, so a node created when ctx ends is finished.
func (cr *creator) one(ctx context.Context, name string) {
	life, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalizerWait+10*time.Second)
	defer cancel()
	nodes := cr.c.Client.CoreV1().Nodes()
	if _, err := cr.c.CreateNode(life, name, simulated()); err != nil {
		cr.fail("CREATE %s: %v", name, err)
		return
	}
	cr.mu.Lock()
	cr.created = append(cr.created, name)
	cr.mu.Unlock()
	first := true
	deadline := time.Now().Add(finalizerWait)
	for {
		n, err := nodes.Get(life, name, metav1.GetOptions{})
		if err != nil {
			cr.fail("get %s: %v", name, err)
			return
		}
		if slices.Contains(n.Finalizers, finalizer) {
			cr.mu.Lock()
			if first {
				cr.admission++
			} else {
				cr.backfill++
			}
			cr.mu.Unlock()
			break
		}
		if time.Now().After(deadline) {
			cr.fail("node %s created during the roll has no finalizer after %s (finalizers %v)", name, finalizerWait, n.Finalizers)
			break
		}
		first = false
		time.Sleep(200 * time.Millisecond)
	}
	if err := nodes.Delete(life, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		cr.fail("delete %s: %v", name, err)
	}
}

// during runs the creator while roll runs, then waits until every node it
// created is gone (each one's cleanup completed) and reports.
func (cr *creator) during(t *testing.T, m *monitor, roll func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); cr.run(ctx) }()
	roll()
	cancel()
	<-done
	cr.mu.Lock()
	created := slices.Clone(cr.created)
	cr.mu.Unlock()
	harness.Eventually(t, 90*time.Second, "every node created during the roll cleaned up and gone", func() (bool, string) {
		var left []string
		for _, name := range created {
			if _, ok := m.goneAt(name); !ok {
				left = append(left, name)
			}
		}
		return len(left) == 0, fmt.Sprintf("%d of %d still present: %v", len(left), len(created), left)
	})
	cr.mu.Lock()
	defer cr.mu.Unlock()
	t.Logf("%s: %d nodes created during the roll: finalizer at creation (admission) %d, later (back-fill) %d", cr.prefix, len(created), cr.admission, cr.backfill)
	if len(created) == 0 {
		t.Errorf("%s: no node was created during the roll", cr.prefix)
	}
	for _, f := range cr.failures {
		t.Error(f)
	}
}

// podsOf lists the pods with label app=app, and whether each one is Ready,
// not terminating and runs image tag.
func podsOf(ctx context.Context, c *harness.Cluster, app, tag string) (all []corev1.Pod, current int, err error) {
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, 0, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) && strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) {
			current++
		}
	}
	return pods.Items, current, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// rolledTo reports whether every agent and webhook pod runs tag, is Ready,
// and no other pod of theirs is left.
func rolledTo(ctx context.Context, c *harness.Cluster, tag string) (bool, string) {
	var msg []string
	done := true
	for app, want := range map[string]int{agentApp: len(c.Nodes), webhookApp: webhookReplicas} {
		all, current, err := podsOf(ctx, c, app, tag)
		if err != nil {
			return false, err.Error()
		}
		if current != want || len(all) != want {
			done = false
		}
		msg = append(msg, fmt.Sprintf("%s: %d of %d pods on %s, %d pods in all", app, current, want, tag, len(all)))
	}
	return done, strings.Join(msg, "; ")
}

// podIPsOn are the IPs of the webhook pods that run tag.
func podIPsOn(t *testing.T, c *harness.Cluster, tag string) []string {
	t.Helper()
	all, _, err := podsOf(t.Context(), c, webhookApp, tag)
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range all {
		if strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips
}

// waitRounds returns once every agent pod has run two more periodic rounds
// (its api check timed twice more; the old agents have no other round
// counter): the anchor of "nothing happened for two check periods".
func waitRounds(t *testing.T, c *harness.Cluster) {
	t.Helper()
	all, _, err := podsOf(t.Context(), c, agentApp, "")
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, p := range all {
		urls = append(urls, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(harness.MetricsPort))+"/metrics")
	}
	harness.WaitCountersAt(t, urls, harness.Counter{Name: "node_check_duration_seconds_count", Match: []string{`check="api"`}}, 2, "two check periods", nil)
}
