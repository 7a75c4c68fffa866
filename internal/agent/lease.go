package agent

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// retaintLock is a Lease that serializes the count-then-taint of the fleet
// budget across agents: without it, every agent of a cluster whose DNS just
// died counts zero re-tainted nodes at the same moment and all of them taint.
// It is taken only on the rare re-taint path.
//
// No agent can block the others or take the lease from a live holder,
// whatever it writes: the times and the duration in the Lease come from the
// writer's clock and code and are not trusted. Like client-go's leader
// election, an agent takes over another holder's record only after it has
// seen that very record (its resourceVersion) unchanged for duration on its
// own clock; and a holder acts on the lease only within the first part of
// duration after it took it, so a taker cannot overlap with it.
type retaintLock struct {
	// leases are the Leases of namespace.
	leases          coordinationv1client.LeaseInterface
	namespace, name string
	holder          string
	// duration is how long the holder may keep the lease; it is written
	// into the Lease for people to read, never read from it.
	duration time.Duration
	// clock measures the spans (the real clock's monotonic reading) and
	// dates the refusals.
	clock clock.PassiveClock

	// observedRV is another holder's record as last seen, and observedAt
	// when this agent first saw it: when the read that returned it had
	// answered, so never before the holder took it.
	observedRV string
	observedAt time.Time
	// acquiredAt is when this agent last took the lease: before it even
	// read the Lease, so never after any other agent first saw its record.
	acquiredAt time.Time

	// refused, when set, is written into the Lease as
	// api.FleetBudgetRefusedAnnotation when the holder releases it: the
	// fleet budget refused this holder's re-taint. Remediation reads it.
	refused string
}

// concurrentTaker names the holder when another agent's write beat ours:
// the deferral's log and Event name someone, not "".
const concurrentTaker = "another agent (it won a concurrent take)"

// acquire takes the lease if it is free, ours, or another holder's record
// has stayed the same for duration. Otherwise it returns false and the
// holder; the caller tries again next round.
func (l *retaintLock) acquire(ctx context.Context) (bool, string, error) {
	start := l.clock.Now()
	lease, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace}}
		l.fill(lease, start)
		_, err = l.leases.Create(ctx, lease, metav1.CreateOptions{FieldManager: api.FieldManagerAgent})
		if apierrors.IsAlreadyExists(err) {
			return false, concurrentTaker, nil
		}
		if err != nil {
			return false, "", err
		}
		l.acquiredAt = start
		return true, "", nil
	}
	if err != nil {
		return false, "", err
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "" && holder != l.holder {
		// The record is dated from the answer, not from the question: a read
		// that waited (in the client's rate limiter, or queued by the API
		// server) may return a record written long after it was sent, by a
		// holder that has all its time still ahead of it.
		seen := l.clock.Now()
		if lease.ResourceVersion != l.observedRV {
			l.observedRV, l.observedAt = lease.ResourceVersion, seen
			return false, holder, nil
		}
		if seen.Sub(l.observedAt) < l.duration {
			return false, holder, nil
		}
	}
	l.fill(lease, start)
	// The Update carries the resourceVersion we read: a concurrent taker makes it conflict.
	_, err = l.update(ctx, lease)
	if apierrors.IsConflict(err) {
		return false, concurrentTaker, nil
	}
	if err != nil {
		return false, "", err
	}
	l.acquiredAt, l.observedRV = start, ""
	return true, "", nil
}

// deadline is the moment this holder's count-then-taint must be done by. A
// taker first sees the record after it was written and then waits duration:
// a third of it is left for the holder's last request to land.
func (l *retaintLock) deadline() time.Time {
	return l.acquiredAt.Add(l.duration * 2 / 3)
}

// held reports whether the holder may still act on the lease it took.
func (l *retaintLock) held() bool {
	return !l.acquiredAt.IsZero() && l.clock.Now().Before(l.deadline())
}

func (l *retaintLock) fill(lease *coordinationv1.Lease, now time.Time) {
	t := metav1.NewMicroTime(now)
	lease.Spec.HolderIdentity = ptr.To(l.holder)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(l.duration / time.Second))
	lease.Spec.AcquireTime = &t
	lease.Spec.RenewTime = &t
}

// release hands the lease back if we still hold it; failure only delays the
// next taker by duration. It waits for the API server at most duration:
// the caller runs it past its own cancellation, and a Lease left behind is
// taken over after duration anyway.
//
// A refusal of the fleet budget (refuseBy) is written in the same update:
// the signal costs no request of its own. If the release fails, so does the
// signal this round; the refused agent says it again the next.
func (l *retaintLock) release(ctx context.Context) {
	refused := l.refused
	l.acquiredAt, l.refused = time.Time{}, ""
	ctx, cancel := context.WithTimeout(ctx, l.duration)
	defer cancel()
	lease, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
	if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != l.holder {
		return
	}
	lease.Spec.HolderIdentity = ptr.To("")
	if refused != "" {
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[api.FleetBudgetRefusedAnnotation] = refused
	}
	_, _ = l.update(ctx, lease)
}

// update replaces the Lease; the resourceVersion it carries is the
// precondition.
func (l *retaintLock) update(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: api.FieldManagerAgent})
}

// refuseBy records that the fleet budget refused node's re-taint, to be
// written when the lease is released. The value changes every time (the
// holder's clock, to the nanosecond): readers take a change as a refusal.
func (l *retaintLock) refuseBy(node string) {
	l.refused = node + " " + l.clock.Now().UTC().Format(time.RFC3339Nano)
}
