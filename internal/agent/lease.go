package agent

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// retaintLock is a Lease that serializes the count-then-taint of the fleet
// budget across agents: without it, every agent of a cluster whose DNS just
// died counts zero re-tainted nodes at the same moment and all of them taint.
// It is taken only on the rare re-taint path.
type retaintLock struct {
	client          LeaseClient
	namespace, name string
	holder          string
	duration        time.Duration
}

// acquire takes the lease if it is free, expired or ours. false means another
// agent holds it; the caller tries again next round.
func (l *retaintLock) acquire(ctx context.Context) (bool, error) {
	now := metav1.NowMicro()
	lease, err := l.client.GetLease(ctx, l.namespace, l.name)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace}}
		l.fill(lease, now)
		_, err = l.client.CreateLease(ctx, lease)
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "" && holder != l.holder && lease.Spec.RenewTime != nil {
		expires := lease.Spec.RenewTime.Add(time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second)
		if now.Time.Before(expires) {
			return false, nil
		}
	}
	l.fill(lease, now)
	// The Update carries the resourceVersion we read: a concurrent taker makes it conflict.
	_, err = l.client.UpdateLease(ctx, lease)
	if apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, err
}

func (l *retaintLock) fill(lease *coordinationv1.Lease, now metav1.MicroTime) {
	lease.Spec.HolderIdentity = ptr.To(l.holder)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(l.duration / time.Second))
	lease.Spec.AcquireTime = &now
	lease.Spec.RenewTime = &now
}

// release hands the lease back if we still hold it; failure only delays the
// next taker until the lease expires.
func (l *retaintLock) release(ctx context.Context) {
	lease, err := l.client.GetLease(ctx, l.namespace, l.name)
	if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != l.holder {
		return
	}
	lease.Spec.HolderIdentity = ptr.To("")
	_, _ = l.client.UpdateLease(ctx, lease)
}
