// Package leader runs work only while this replica holds a Lease, and
// never after its term ended: the webhook replicas' one-leader rule.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election configures leader election on a Lease.
type Election struct {
	// Client reads and writes the Lease.
	Client kubernetes.Interface
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity is this replica's holder identity (unique per process).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's knobs.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// term is one run of a LeaderElector. client-go starts OnStartedLeading in a
// goroutine and does not wait for it, so LeaderElector.Run can return (lease
// lost, or released on shutdown) before the callback has even begun. term
// makes sure that lead either started before the run ended, and is waited
// for, or never starts: otherwise a late lead would work without the Lease,
// overlapping the next term's lead or another replica's.
type term struct {
	mu      sync.Mutex
	over    bool          // no lead may start any more
	leading chan struct{} // closed when lead returns; nil if it never started
}

// begin registers a starting lead; false when the term is already over.
func (t *term) begin() (done chan struct{}, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over {
		return nil, false
	}
	t.leading = make(chan struct{})
	return t.leading, true
}

// end stops any further lead from starting and waits for a running one.
func (t *term) end() {
	t.mu.Lock()
	t.over = true
	done := t.leading
	t.mu.Unlock()
	if done != nil {
		<-done
	}
}

// RunElected calls lead with a context that ends when leadership is lost or
// ctx ends, every time this replica becomes leader, until ctx ends. The Lease
// is released only after lead has returned, so two replicas never work at once.
func RunElected(ctx context.Context, e Election, log *slog.Logger, lead func(context.Context)) error {
	for ctx.Err() == nil {
		t := &term{}
		// The elector's context outlives ctx on purpose: on shutdown the work
		// stops first, and only then is the Lease released (ReleaseOnCancel).
		electCtx, cancelElect := context.WithCancel(context.WithoutCancel(ctx))
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
				Client:     e.Client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
			},
			LeaseDuration:   e.LeaseDuration,
			RenewDeadline:   e.RenewDeadline,
			RetryPeriod:     e.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            e.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					done, ok := t.begin()
					if !ok {
						return
					}
					defer close(done)
					wctx, cancel := context.WithCancel(lctx)
					defer cancel()
					stop := context.AfterFunc(ctx, cancel)
					defer stop()
					log.Info("became leader", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity)
					lead(wctx)
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					if id != e.Identity {
						log.Info("leader is another replica", "leader", id)
					}
				},
			},
		})
		if err != nil {
			cancelElect()
			return fmt.Errorf("leader election on lease %s/%s: %w", e.Namespace, e.Name, err)
		}
		stopWatch := context.AfterFunc(ctx, func() {
			t.end()
			cancelElect()
		})
		le.Run(electCtx)
		stopWatch()
		t.end() // lead has seen its context end
		cancelElect()
		if ctx.Err() == nil {
			log.Warn("lost leadership; standing for election again", "lease", e.Namespace+"/"+e.Name)
		}
	}
	return nil
}
