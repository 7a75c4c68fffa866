package remediate

import (
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// R2: while an agent was refused a re-taint by the fleet budget within the
// deadline, nothing is replaced, whatever the labels count now (a recovered
// or bypassed node frees a slot the fault still fills). The refusal is
// dated on the controller's own clock when its value changes; a Lease that
// cannot be read holds too; and when the hold ends every node gets a full
// deadline again.
func TestBudgetRefusalHoldsEveryReplacement(t *testing.T) {
	stuck := node("stuck", time.Hour, taint(startup))
	f := newFixture(t, PolicyReplace, []*corev1.Node{stuck})
	f.c.cfg.Namespace, f.c.cfg.RetaintLease = "kube-node-ready", api.RetaintLease
	refuse := func(value string) {
		t.Helper()
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: api.RetaintLease, Namespace: "kube-node-ready",
			Annotations: map[string]string{api.FleetBudgetRefusedAnnotation: value}}}
		gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
		err := f.client.Tracker().Update(gvr, lease, lease.Namespace)
		if apierrors.IsNotFound(err) {
			err = f.client.Tracker().Create(gvr, lease, lease.Namespace)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// run scans every Interval for d, as the leader does (a gap in the scans
	// would restart every node's time by itself), and fails on any delete.
	run := func(d time.Duration, when string) {
		t.Helper()
		for end := f.clock.Now().Add(d); !f.clock.Now().After(end); f.clock.Step(f.c.cfg.Interval) {
			f.scan(f.cached("stuck")...)
			if len(f.deletes()) != 0 {
				t.Fatalf("%s: deleted %v at +%s, want nothing", when, f.deletes(), f.clock.Now().Sub(t0))
			}
		}
	}

	// Without a refusal the node, an hour old, is replaced: the control.
	// (A second fixture: this one must not act.)
	control := newFixture(t, PolicyReplace, []*corev1.Node{stuck})
	control.c.cfg.Namespace, control.c.cfg.RetaintLease = "kube-node-ready", api.RetaintLease
	control.scan(control.cached("stuck")...)
	if got := control.deletes(); len(got) != 1 {
		t.Fatalf("control: deletes %v, want the overdue node replaced when no agent was refused", got)
	}

	refuse("live-3 2026-11-28T08:00:00Z")
	run(29*time.Minute, "a refusal seen, under the 30 min deadline")
	refuse("live-3 2026-11-28T08:29:00Z")
	run(20*time.Minute, "20 min after a new refusal")

	// The Lease cannot be read: the budget's state is unknown.
	f.client.PrependReactor("get", "leases", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, api.RetaintLease, errors.New("no"))
	})
	run(20*time.Minute, "the Lease unreadable, the last refusal older than the deadline")
	f.client.ReactionChain = f.client.ReactionChain[1:]

	// Readable again, the refusal aged out: the hold ends, and with it the
	// episode: the node gets a full deadline from now and is replaced only
	// after it.
	run(29*time.Minute, "the hold ended: the node's time restarted")
	var got []string
	for i := 0; i < 4 && len(got) == 0; i++ {
		f.clock.Step(f.c.cfg.Interval)
		f.scan(f.cached("stuck")...)
		for _, d := range f.deletes() {
			got = append(got, d.GetName())
		}
	}
	if !slices.Equal(got, []string{"stuck"}) {
		t.Fatalf("deletes %v within 2 min of a full deadline after the hold ended, want the node stuck", got)
	}
}

// The fresh read before a delete asks the Lease again: a refusal that came
// after the scan's read holds the delete.
func TestBudgetRefusalOnTheFreshRead(t *testing.T) {
	stuck := node("stuck", time.Hour, taint(startup))
	f := newFixture(t, PolicyReplace, []*corev1.Node{stuck})
	f.c.cfg.Namespace, f.c.cfg.RetaintLease = "kube-node-ready", api.RetaintLease
	gets := 0
	f.client.PrependReactor("get", "leases", func(core.Action) (bool, runtime.Object, error) {
		gets++
		if gets == 1 { // the scan's read: no agent ever took the Lease
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, api.RetaintLease)
		}
		return true, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: api.RetaintLease, Namespace: "kube-node-ready",
			Annotations: map[string]string{api.FleetBudgetRefusedAnnotation: "live-3 now"}}}, nil
	})
	got := f.scan(f.cached("stuck")...)
	if len(f.deletes()) != 0 {
		t.Fatalf("deleted %v, want the delete held by the refusal on the fresh read", f.deletes())
	}
	if n := len(slices.DeleteFunc(got, func(s string) bool { return s != "get leases "+api.RetaintLease })); n != 2 {
		t.Errorf("%d reads of the Lease in %q, want 2: the scan's and the fresh one before the delete", n, got)
	}
}
