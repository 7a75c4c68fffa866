//go:build e2e

package faults_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// taintLog records, from a watch of every Node, each change of the taints
// of ours a node carries: a taint that came and went between two polls is
// in it too.
type taintLog struct {
	mu      sync.Mutex
	last    map[string]string // node -> its taints of ours, as last seen
	changes []taintChange
}

// taintChange is one node's taints of ours as of a moment.
type taintChange struct {
	node   string
	at     time.Time
	taints string
}

// watchTaints starts a taint log for the rest of the test.
func watchTaints(t *testing.T) *taintLog {
	t.Helper()
	l := &taintLog{last: map[string]string{}}
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	record := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			l.record(n.Name, strings.Join(ours(n), ","))
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("node informer did not sync")
	}
	return l
}

func (l *taintLog) record(node, taints string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, seen := l.last[node]; seen && prev == taints {
		return
	}
	l.last[node] = taints
	l.changes = append(l.changes, taintChange{node: node, at: time.Now(), taints: taints})
}

// taintedSince lists, as "node: taints", every time a node other than
// those in except gained taints of ours after since.
func (l *taintLog) taintedSince(since time.Time, except ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ch := range l.changes {
		if ch.at.After(since) && ch.taints != "" && !slices.Contains(except, ch.node) {
			out = append(out, ch.node+": "+ch.taints+" at "+ch.at.Format("15:04:05.000"))
		}
	}
	return out
}

// assertNoRetaint fails t if a node other than those in except gained a
// taint of ours after since. Call it only after a positive signal (rounds
// of the agents) says the agents had their chance to taint.
func (l *taintLog) assertNoRetaint(t *testing.T, since time.Time, except ...string) {
	t.Helper()
	if got := l.taintedSince(since, except...); len(got) > 0 {
		t.Errorf("spurious taints of ours: %v", got)
	}
}
