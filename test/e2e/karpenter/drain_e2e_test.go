//go:build e2e

package karpenter

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// What a drain did, seen two ways: a watch on the pods and the Node, in the
// order the API server wrote (resourceVersions, etcd revisions of one
// store), and the API server's audit log (who asked for which eviction or
// delete, and what it answered).

// watchNodeGone watches the node and returns a wait for it to be deleted,
// which returns the resourceVersion of its deletion (an etcd revision,
// comparable with those of the pods' events on the same store).
func (e *env) watchNodeGone(t *testing.T, node string) func(timeout time.Duration) int64 {
	t.Helper()
	w, err := e.cp.Client.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return func(timeout time.Duration) int64 {
		t.Helper()
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch of node %s closed", node)
				}
				if n, isNode := ev.Object.(*corev1.Node); isNode && ev.Type == watch.Deleted {
					return rv(n.ResourceVersion)
				}
			case <-timer.C:
				t.Fatalf("node %s not gone within %s", node, timeout)
			}
		}
	}
}

// podLog follows the pods of one app through a single watch, so that what
// it counts is the order the API server wrote, not what polls caught.
type podLog struct {
	mu    sync.Mutex
	want  int
	pods  map[string]*podTrack
	armed bool
	min   int
	minRV int64
}

// podTrack is what the watch saw of one pod.
type podTrack struct {
	node string
	// ready: Ready and not being deleted, what a PDB counts as healthy;
	// readyRV is the first event where it was.
	ready   bool
	readyRV int64
	// terminating: seen with a deletionTimestamp (graceful deletion)
	// before it went.
	terminating bool
	// evicted: carried the DisruptionTarget condition the Eviction API
	// sets (reason EvictionByEvictionAPI).
	evicted   bool
	deletedRV int64
}

// watchPods starts the watch of the pods labelled app=name; the count of
// available pods is followed from the moment it first reaches want.
func (e *env) watchPods(t *testing.T, name string, want int) *podLog {
	t.Helper()
	w, err := e.cp.Client.CoreV1().Pods("default").Watch(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &podLog{want: want, pods: map[string]*podTrack{}}
	go func() {
		for ev := range w.ResultChan() {
			l.see(ev)
		}
	}()
	harness.Eventually(t, 30*time.Second, "the watch of "+name+" sees its pods available", func() (bool, string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.armed, ""
	})
	return l
}

func (l *podLog) see(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tr := l.pods[p.Name]
	if tr == nil {
		tr = &podTrack{}
		l.pods[p.Name] = tr
	}
	at := rv(p.ResourceVersion)
	tr.node = p.Spec.NodeName
	if p.DeletionTimestamp != nil && ev.Type != watch.Deleted {
		tr.terminating = true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			tr.evicted = true
		}
	}
	tr.ready = ev.Type != watch.Deleted && p.DeletionTimestamp == nil && podReady(p)
	if tr.ready && tr.readyRV == 0 {
		tr.readyRV = at
	}
	if ev.Type == watch.Deleted {
		tr.deletedRV = at
	}
	n := l.countLocked()
	switch {
	case !l.armed && n >= l.want:
		l.armed, l.min, l.minRV = true, n, at
	case l.armed && n < l.min:
		l.min, l.minRV = n, at
	}
}

func (l *podLog) countLocked() int {
	n := 0
	for _, tr := range l.pods {
		if tr.ready {
			n++
		}
	}
	return n
}

// available is how many pods are available now.
func (l *podLog) available() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.countLocked()
}

// low is the fewest pods available since the count first reached want,
// and the resourceVersion where it did.
func (l *podLog) low() (int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.min, l.minRV
}

// track is a copy of what the watch saw of pod name (nil: nothing).
func (l *podLog) track(name string) *podTrack {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tr := l.pods[name]; tr != nil {
		c := *tr
		return &c
	}
	return nil
}

// firstReadyElsewhere is the resourceVersion at which the first pod on
// another node than node became Ready (0: none did).
func (l *podLog) firstReadyElsewhere(node string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first int64
	for _, tr := range l.pods {
		if tr.node != node && tr.readyRV != 0 && (first == 0 || tr.readyRV < first) {
			first = tr.readyRV
		}
	}
	return first
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func podNodes(pods []corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		out[p.Name] = p.Spec.NodeName
	}
	return out
}

func rv(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// auditLog is the API server's audit log: every request's answer.
type auditLog []auditEntry

// auditEntry is the part of an audit event read here.
type auditEntry struct {
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// component names the client of a request by its user agent's program
// ("karpenter", "kwok", "kube-controller-manager", ...): every component
// but our webhook and agents uses the admin's credentials here.
func (a auditEntry) component() string {
	name, _, _ := strings.Cut(a.UserAgent, "/")
	return name
}

// evictionCount sorts the eviction requests of some pods.
type evictionCount struct {
	// granted: Karpenter's, answered 201; refused: Karpenter's, answered
	// 429 (the PDB allows no disruption now); late: Karpenter's, for a pod
	// already gone (404, 409: a stale cache); others: anything else.
	granted, refused, late, others int
}

func (c evictionCount) String() string {
	return fmt.Sprintf("%d granted, %d refused (429), %d late, %d other", c.granted, c.refused, c.late, c.others)
}

func (l auditLog) evictions(pods ...string) evictionCount {
	var c evictionCount
	for _, a := range l {
		if a.Verb != "create" || a.ObjectRef.Resource != "pods" || a.ObjectRef.Subresource != "eviction" || !slices.Contains(pods, a.ObjectRef.Name) {
			continue
		}
		switch {
		case a.component() == "karpenter" && a.ResponseStatus.Code == 201:
			c.granted++
		case a.component() == "karpenter" && a.ResponseStatus.Code == 429:
			c.refused++
		case a.component() == "karpenter" && (a.ResponseStatus.Code == 404 || a.ResponseStatus.Code == 409):
			c.late++
		default:
			c.others++
		}
	}
	return c
}

// podDeletes counts the successful deletes of the pods by component.
func (l auditLog) podDeletes(pods ...string) map[string]int {
	by := map[string]int{}
	for _, a := range l {
		if a.Verb == "delete" && a.ObjectRef.Resource == "pods" && a.ObjectRef.Subresource == "" && slices.Contains(pods, a.ObjectRef.Name) && a.ResponseStatus.Code < 300 {
			by[a.component()]++
		}
	}
	return by
}

// deleteOf is when component's first successful delete of the object
// name was received (zero: none).
func (l auditLog) deleteOf(component, name string) time.Time {
	for _, a := range l {
		if a.Verb == "delete" && a.ObjectRef.Subresource == "" && a.ObjectRef.Name == name && a.component() == component && a.ResponseStatus.Code < 300 {
			return a.Received
		}
	}
	return time.Time{}
}

// count is how many requests user sent with verb on the object.
func (l auditLog) count(user, verb, resource, name string) int {
	n := 0
	for _, a := range l {
		if a.User.Username == user && a.Verb == verb && a.ObjectRef.Resource == resource && a.ObjectRef.Subresource == "" && a.ObjectRef.Name == name {
			n++
		}
	}
	return n
}

// readAudit reads the audit log's answered requests.
func (e *env) readAudit(t *testing.T) auditLog {
	t.Helper()
	f, err := os.Open(e.cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out auditLog
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var a auditEntry
		if json.Unmarshal(sc.Bytes(), &a) == nil && a.Stage == "ResponseComplete" {
			out = append(out, a)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
