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
// budget's invariant is checked at every state the API server sent, not at
// samples. The count moves by one per change, so that a burst of 10 000
// Node updates is read as fast as the API server sends it: a watcher that
// falls 100 events behind is closed by the API server's watch cache. A
// watch the server closes anyway is followed by a new list and watch from
// there (Relists counts them); the states between the two are not seen.
type Retainted struct {
	client kubernetes.Interface
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	tainted map[string]bool
	count   int
	most    int
	relists int
	err     error
}

// WatchRetainted lists the Nodes and follows them from there until Stop.
func WatchRetainted(ctx context.Context, client kubernetes.Interface) (*Retainted, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &Retainted{client: client, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	w, err := r.listAndWatch()
	if err != nil {
		cancel()
		return nil, err
	}
	go r.follow(w)
	return r, nil
}

// listAndWatch replaces what r knows with a list of every Node and returns
// a watch from that list's version.
func (r *Retainted) listAndWatch() (watch.Interface, error) {
	list, err := r.client.CoreV1().Nodes().List(r.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	r.mu.Lock()
	r.tainted, r.count = map[string]bool{}, 0
	for i := range list.Items {
		r.observeLocked(&list.Items[i], false)
	}
	r.mu.Unlock()
	w, err := r.client.CoreV1().Nodes().Watch(r.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	return w, nil
}

// follow reads w, and after it a new list and watch each time the server
// ends one, until Stop.
func (r *Retainted) follow(w watch.Interface) {
	defer close(r.done)
	for {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				r.mu.Lock()
				r.observeLocked(n, ev.Type == watch.Deleted)
				r.mu.Unlock()
			}
		}
		if r.ctx.Err() != nil {
			return
		}
		var err error
		if w, err = r.listAndWatch(); err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		}
		r.mu.Lock()
		r.relists++
		r.mu.Unlock()
	}
}

// observeLocked records n's state; r.mu is held.
func (r *Retainted) observeLocked(n *corev1.Node, deleted bool) {
	now := !deleted && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == harness.UnhealthyTaint.Key })
	if was := r.tainted[n.Name]; was != now {
		if now {
			r.count++
		} else {
			r.count--
		}
	}
	if deleted {
		delete(r.tainted, n.Name)
	} else {
		r.tainted[n.Name] = now
	}
	r.most = max(r.most, r.count)
}

// Now is how many nodes are re-tainted.
func (r *Retainted) Now() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Stop ends the watch and returns the most nodes re-tainted at once, how
// many times the watch had to be listed again, and an error when following
// stopped early (a list or watch refused).
func (r *Retainted) Stop() (most, relists int, err error) {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.most, r.relists, r.err
}
