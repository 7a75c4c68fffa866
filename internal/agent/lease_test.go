package agent

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

func leaseAt(holder string, renew time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-node-ready-retaint", Namespace: "kube-node-ready", ResourceVersion: "7"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(seconds),
			AcquireTime: &metav1.MicroTime{Time: renew}, RenewTime: &metav1.MicroTime{Time: renew},
		},
	}
}

// TestRetaintLockIsNeverBlockedOrStolenByOneAgent: whatever one agent wrote
// into the re-taint Lease (a renew time from a clock far ahead, an absurd
// or a zero duration) or however it went away, the others take the Lease
// over after watching the same record for the lock's own duration on their
// own clock; and an agent whose clock is far ahead cannot take a Lease
// another agent holds right now.
func TestRetaintLockIsNeverBlockedOrStolenByOneAgent(t *testing.T) {
	real := time.Now()
	const duration = 15 * time.Second
	tests := []struct {
		name string
		// lease is what the other agent left.
		lease *coordinationv1.Lease
		// skew is how far this agent's clock is from the writer's.
		skew time.Duration
	}{
		{name: "holder went away with its clock a year ahead", lease: leaseAt("gone", real.Add(365*24*time.Hour), 15)},
		{name: "holder went away after writing an absurd duration", lease: leaseAt("gone", real, math.MaxInt32)},
		{name: "holder writes a zero duration: not taken at once", lease: leaseAt("busy", real, 0)},
		{name: "this agent's clock a year ahead: a live holder keeps the lease", lease: leaseAt("busy", real, 15), skew: 365 * 24 * time.Hour},
		{name: "this agent's clock a year behind: a gone holder is still taken over", lease: leaseAt("gone", real, 15), skew: -365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCluster(t, tt.lease)
			clk := clocktesting.NewFakeClock(real.Add(tt.skew))
			l := testLock(f, "n1", duration, clk)
			// Right after the other agent wrote it, the lease is its own.
			got, holder, err := l.acquire(t.Context())
			if err != nil || got || holder != ptr.Deref(tt.lease.Spec.HolderIdentity, "") {
				t.Fatalf("first acquire = %v, %q, %v; want false, held by %s", got, holder, err, ptr.Deref(tt.lease.Spec.HolderIdentity, ""))
			}
			clk.Step(duration - time.Second)
			if got, _, err := l.acquire(t.Context()); err != nil || got {
				t.Fatalf("acquire %s after first seeing the record = %v, %v; want false", duration-time.Second, got, err)
			}
			// The same record for the whole duration: the holder is gone.
			clk.Step(time.Second)
			if got, _, err := l.acquire(t.Context()); err != nil || !got {
				t.Fatalf("acquire after the record stayed the same for %s = %v, %v; want true: one agent blocks every re-taint", duration, got, err)
			}
			if h := ptr.Deref(f.lease().Spec.HolderIdentity, ""); h != "n1" {
				t.Errorf("lease holder = %q, want n1", h)
			}
		})
	}
}

// TestRetaintLockHolderRenewingIsNotTakenOver: a record that changes (the
// lease taken and released by live agents) starts the watch again.
func TestRetaintLockHolderRenewingIsNotTakenOver(t *testing.T) {
	f := newCluster(t, leaseAt("busy", time.Now(), 15))
	clk := clocktesting.NewFakeClock(time.Now())
	l := testLock(f, "n1", 15*time.Second, clk)
	for range 5 {
		if got, _, _ := l.acquire(t.Context()); got {
			t.Fatal("took a lease whose record keeps changing")
		}
		clk.Step(10 * time.Second)
		// The holder renews: a new resourceVersion.
		if _, err := f.CoordinationV1().Leases("kube-node-ready").Update(t.Context(), f.lease(), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// testLock is holder's re-taint lock on f's Lease.
func testLock(f *cluster, holder string, duration time.Duration, clk clock.PassiveClock) *retaintLock {
	return &retaintLock{
		leases: f.CoordinationV1().Leases("kube-node-ready"), namespace: "kube-node-ready", name: "kube-node-ready-retaint",
		holder: holder, duration: duration, clock: clk,
	}
}

// TestRetaintLockHeldOnlyWithinItsTime: the holder may act on the lease only
// while no other agent can have taken it over: a count that took most of the
// duration must not be followed by a taint.
func TestRetaintLockHeldOnlyWithinItsTime(t *testing.T) {
	f := newFakeCluster(t)
	clk := clocktesting.NewFakeClock(time.Now())
	l := testLock(f, "n1", 15*time.Second, clk)
	if got, _, err := l.acquire(t.Context()); err != nil || !got {
		t.Fatalf("acquire a free lease = %v, %v", got, err)
	}
	if !l.held() {
		t.Fatal("not held right after acquire")
	}
	clk.Step(10 * time.Second)
	if l.held() {
		t.Error("held 10 s into a 15 s lease: another agent may take it over before the taint lands")
	}
}

// slowLeaseRead answers a Lease read as a read that waited (in the client's
// rate limiter, or queued by the API server's flow control) while during
// ran: the answer is the Lease as it is when the read is finally served.
type slowLeaseRead struct {
	coordinationv1client.LeaseInterface
	during func()
}

func (s *slowLeaseRead) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	if d := s.during; d != nil {
		s.during = nil
		d()
	}
	return s.LeaseInterface.Get(ctx, name, o)
}

// TestRetaintLockTakerDatesWhatItSawFromTheAnswer: a taker whose read of the
// Lease waited while another agent took it must date that record from when
// the answer came, not from when it asked; else it takes the Lease over while
// the holder still counts and taints, and both re-taint beyond the budget.
func TestRetaintLockTakerDatesWhatItSawFromTheAnswer(t *testing.T) {
	f := newFakeCluster(t)
	clk := clocktesting.NewFakeClock(time.Now())
	const duration = 15 * time.Second
	holder := testLock(f, "a", duration, clk)
	taker := testLock(f, "b", duration, clk)
	read := &slowLeaseRead{LeaseInterface: taker.leases}
	taker.leases = read
	// The taker asks; its read waits 9 s, meanwhile the holder takes the free Lease.
	read.during = func() {
		clk.Step(9 * time.Second)
		if got, _, err := holder.acquire(t.Context()); err != nil || !got {
			t.Fatalf("holder acquire of a free lease = %v, %v", got, err)
		}
	}
	if got, who, err := taker.acquire(t.Context()); err != nil || got || who != "a" {
		t.Fatalf("taker acquire = %v, %q, %v; want false, held by a", got, who, err)
	}
	for range 20 {
		clk.Step(time.Second)
		got, _, err := taker.acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got && holder.held() {
			t.Fatalf("taker took the lease %s after the holder did, while the holder may still act on it (until %s after): two agents hold it",
				clk.Now().Sub(holder.acquiredAt), holder.deadline().Sub(holder.acquiredAt))
		}
		if got {
			return
		}
	}
	t.Fatal("taker never took over a lease left unchanged")
}

// slowFleetCount answers the fleet budget's label-selector read only when
// the caller gives up: an API server that cannot count in time.
type slowFleetCount struct{ corev1client.NodeInterface }

func (s slowFleetCount) List(ctx context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	if o.LabelSelector != "" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.NodeInterface.List(ctx, o)
}

// TestRetaintCountOutlastingTheLeaseIsDeferred: a fleet count that runs out
// of the Lease's time is a re-taint deferred because the Lease expired
// (metric, Event), not a refusal of the fleet budget.
func TestRetaintCountOutlastingTheLeaseIsDeferred(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
	a, rec := startTestAgent(t, f, stubCheck{err: errDNS}, nil)
	a.nodes = slowFleetCount{a.nodes}
	a.lock.duration = 300 * time.Millisecond
	a.loop.failures = a.cfg.Thresholds.Retaint - 1
	a.loop.startupOver = true
	a.step(t.Context())
	if HasTaint(f.node("n1").Spec.Taints, unhealthy) {
		t.Fatal("re-tainted without a fleet count")
	}
	if got := testutil.ToFloat64(a.metrics.retaintDeferred.WithLabelValues(DeferLeaseExpired)); got != 1 {
		t.Errorf("node_ready_retaint_deferred_total{reason=%q} = %v, want 1", DeferLeaseExpired, got)
	}
	if got := testutil.ToFloat64(a.metrics.retaintSuppressed); got != 0 {
		t.Errorf("node_ready_retaint_suppressed_total = %v, want 0: the fleet budget refused nothing", got)
	}
	if ev := rec.got(); !slices.Equal(ev, []string{api.EventRetaintDeferred}) {
		t.Errorf("events = %v, want [%s]", ev, api.EventRetaintDeferred)
	}
}

// TestRetaintLockLostRaceNamesAHolder: an agent that loses the Lease to a
// concurrent taker says it is held (the deferral's log and Event name the
// holder), never by "".
func TestRetaintLockLostRaceNamesAHolder(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lease *coordinationv1.Lease
	}{
		{name: "created at the same moment"},
		{name: "taken from a released lease at the same moment", lease: leaseAt("", time.Now(), 15)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t)
			if tt.lease != nil {
				f.add(tt.lease)
			}
			// Every write of the Lease loses to another agent's.
			leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
			f.PrependReactor("create", "leases", func(core.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewAlreadyExists(leases, "kube-node-ready-retaint")
			})
			f.PrependReactor("update", "leases", func(core.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewConflict(leases, "kube-node-ready-retaint", nil)
			})
			l := testLock(f, "n1", 15*time.Second, clock.RealClock{})
			got, holder, err := l.acquire(t.Context())
			if err != nil || got || holder == "" {
				t.Errorf("acquire lost to another agent = %v, %q, %v; want false, a holder named", got, holder, err)
			}
		})
	}
}

// hungLease is an API server that never answers a Lease read.
type hungLease struct {
	coordinationv1client.LeaseInterface
}

func (hungLease) Get(ctx context.Context, _ string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRetaintLockReleaseIsBounded: handing the Lease back runs past the
// round's cancellation (so a stopping agent still releases it), but not
// for ever: an API server that does not answer must not stall the agent's
// loop, and a Lease left behind is taken over after its duration anyway.
func TestRetaintLockReleaseIsBounded(t *testing.T) {
	l := testLock(newFakeCluster(t), "n1", 200*time.Millisecond, clock.RealClock{})
	l.leases = hungLease{l.leases}
	done := make(chan struct{})
	go func() {
		l.release(context.WithoutCancel(t.Context()))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("release still waiting for the API server after 10s (its lease duration is 200ms)")
	}
}

// TestFleetBudgetRefusalIsSaidOnTheLease: a re-taint the fleet budget
// refuses is written on the re-taint Lease (remediation holds while it is
// recent), changed at every refusal, in the release's own update; a re-taint
// the budget allows writes nothing there.
func TestFleetBudgetRefusalIsSaidOnTheLease(t *testing.T) {
	refusal := func(f *cluster) string {
		if l := f.lease(); l != nil {
			return l.Annotations[api.FleetBudgetRefusedAnnotation]
		}
		return ""
	}
	f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil),
		testNode("n2", []corev1.Taint{unhealthy}, retaintedLabel, nil))
	a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, func(c *Config) { c.FleetBudget = mustBudget(t, "1") })
	a.loop.failures = a.cfg.Thresholds.Retaint - 1
	a.loop.startupOver = true
	a.step(t.Context())
	first := refusal(f)
	if !strings.HasPrefix(first, "n1 ") {
		t.Fatalf("%s on the Lease = %q after a refusal, want it to name n1", api.FleetBudgetRefusedAnnotation, first)
	}
	if holder := ptr.Deref(f.lease().Spec.HolderIdentity, ""); holder != "" {
		t.Errorf("Lease holder %q after the round, want it released", holder)
	}
	a.step(t.Context())
	if second := refusal(f); second == first || !strings.HasPrefix(second, "n1 ") {
		t.Errorf("%s = %q after a second refusal, first %q: want a new value naming n1", api.FleetBudgetRefusedAnnotation, second, first)
	}

	g := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
	b, _ := startTestAgent(t, g, stubCheck{err: errDNS}, nil)
	b.loop.failures = b.cfg.Thresholds.Retaint - 1
	b.loop.startupOver = true
	b.step(t.Context())
	if !HasTaint(g.node("n1").Spec.Taints, unhealthy) {
		t.Fatal("not re-tainted with room in the budget")
	}
	if got := refusal(g); got != "" {
		t.Errorf("%s = %q after an allowed re-taint, want none", api.FleetBudgetRefusedAnnotation, got)
	}
}
