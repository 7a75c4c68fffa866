package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// Retainted follows, on a watch of every Node, how many carry the agents'
// unhealthy taint after each change, and the most at once: the fleet
// budget's invariant is checked at every state the API server went
// through, not at samples.
type Retainted struct {
	mu      sync.Mutex
	tainted map[string]bool
	most    int
	w       watch.Interface
	done    chan struct{}
}

// WatchRetainted lists the Nodes and follows them from there until Stop.
func WatchRetainted(ctx context.Context, client kubernetes.Interface) (*Retainted, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	r := &Retainted{tainted: map[string]bool{}, done: make(chan struct{})}
	for i := range list.Items {
		r.observe(&list.Items[i], false)
	}
	r.w, err = client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	go func() {
		defer close(r.done)
		for ev := range r.w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				r.observe(n, ev.Type == watch.Deleted)
			}
		}
	}()
	return r, nil
}

func (r *Retainted) observe(n *corev1.Node, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tainted[n.Name] = !deleted && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == harness.UnhealthyTaint.Key })
	r.most = max(r.most, r.count())
}

// count is how many nodes are re-tainted; r.mu is held.
func (r *Retainted) count() int {
	count := 0
	for _, v := range r.tainted {
		if v {
			count++
		}
	}
	return count
}

// Now is how many nodes are re-tainted.
func (r *Retainted) Now() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count()
}

// Stop ends the watch and returns the most nodes re-tainted at once. A watch
// the server closed ends Stop's count there (the harness's API server keeps
// watches for at least 30 minutes).
func (r *Retainted) Stop() int {
	r.w.Stop()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.most
}
