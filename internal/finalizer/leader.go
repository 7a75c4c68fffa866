package finalizer

import (
	"context"
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

// RunElected calls lead with a context that ends when leadership is lost or
// ctx ends, every time this replica becomes leader, until ctx ends. The Lease
// is released only after lead has returned, so two replicas never work at once.
func RunElected(ctx context.Context, e Election, log *slog.Logger, lead func(context.Context)) error {
	for ctx.Err() == nil {
		var mu sync.Mutex
		var leading chan struct{}
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
					done := make(chan struct{})
					mu.Lock()
					leading = done
					mu.Unlock()
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
			return err
		}
		// On shutdown, stop the work first, then release the Lease.
		stopWatch := context.AfterFunc(ctx, func() {
			mu.Lock()
			done := leading
			mu.Unlock()
			if done != nil {
				<-done
			}
			cancelElect()
		})
		le.Run(electCtx)
		stopWatch()
		mu.Lock()
		done := leading
		mu.Unlock()
		if done != nil {
			<-done // lead has seen its context end
		}
		cancelElect()
		if ctx.Err() == nil {
			log.Warn("lost leadership; standing for election again", "lease", e.Namespace+"/"+e.Name)
		}
	}
	return nil
}
