package remediate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// fakeSwitch is the suspend switch: cached as the watch saw it, fresh as a
// read right now finds it.
type fakeSwitch struct {
	cached, fresh suspend.State
	reads         int
}

func (s *fakeSwitch) State() suspend.State { return s.cached }
func (s *fakeSwitch) Read(context.Context) (suspend.State, error) {
	s.reads++
	return s.fresh, s.fresh.Err
}

var (
	switchOff = suspend.State{Known: true}
	switchOn  = suspend.State{Known: true, On: true, Reason: "dns incident", By: "oncall"}
	switchErr = suspend.State{Err: errors.New("configmaps is forbidden")}
)

// TestSuspendHoldsEveryReplacement: while the operator's switch is on, or
// cannot be read, an overdue node that passes every other gate is not
// replaced, whether the scan's watch shows the switch or only the fresh
// read right before the delete does; the hold is a blocked reason of its
// own. With the switch off the same node is replaced.
func TestSuspendHoldsEveryReplacement(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cached, fresh suspend.State
		want          string // blocked reason; "" replaces
	}{
		{"switch on, seen by the watch", switchOn, switchOn, blockedSuspended},
		{"switch on, seen only on the fresh read", switchOff, switchOn, blockedSuspended},
		{"switch unreadable by the watch", switchErr, switchOff, blockedSuspendUnreadable},
		{"switch not read yet", suspend.State{}, switchOff, blockedSuspendUnreadable},
		{"fresh read fails", switchOff, switchErr, blockedSuspendUnreadable},
		{"switch off", switchOff, switchOff, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, PolicyReplace, []*corev1.Node{node("stuck", time.Hour, taint(startup))})
			f.c.cfg.Suspend = &fakeSwitch{cached: tc.cached, fresh: tc.fresh}
			f.scan(f.cached("stuck")...)
			deleted := len(f.deletes()) != 0
			if tc.want == "" {
				if !deleted {
					t.Fatal("not replaced with the switch off")
				}
				return
			}
			if deleted {
				t.Fatalf("replaced while %s: %v", tc.name, f.deletes())
			}
			if got := testutil.ToFloat64(f.c.blocked.WithLabelValues(tc.want)); got != 1 {
				t.Errorf("node_remediation_blocked_nodes{reason=%q} = %v, want 1", tc.want, got)
			}
		})
	}
}

// TestResumeGivesAFullDeadline: when the switch lets replacements go again,
// every node's time restarts: a node left past the deadline by the
// incident is replaced only a full deadline after the resume.
func TestResumeGivesAFullDeadline(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{node("stuck", time.Hour, taint(startup))})
	sw := &fakeSwitch{cached: switchOn, fresh: switchOn}
	f.c.cfg.Suspend = sw
	f.scan(f.cached("stuck")...)
	sw.cached, sw.fresh = switchOff, switchOff
	for end := f.clock.Now().Add(f.c.cfg.Deadline - f.c.cfg.Interval); f.clock.Now().Before(end); f.clock.Step(f.c.cfg.Interval) {
		f.scan(f.cached("stuck")...)
		if len(f.deletes()) != 0 {
			t.Fatalf("deleted %v at +%s after the resume, within a full deadline", f.deletes(), f.clock.Now().Sub(t0))
		}
	}
	var got []string
	for i := 0; i < 4 && len(got) == 0; i++ {
		f.clock.Step(f.c.cfg.Interval)
		f.scan(f.cached("stuck")...)
		for _, d := range f.deletes() {
			got = append(got, d.GetName())
		}
	}
	if !slices.Equal(got, []string{"stuck"}) {
		t.Fatalf("deletes %v a full deadline after the resume, want stuck", got)
	}
}
