package remediate

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	core "k8s.io/client-go/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/clocktest"
)

// Lead watches the unverified nodes only, scans them every interval on its
// clock (a new leader judges nothing before watching it for a deadline), and zeroes its
// gauges when leadership ends so a former leader raises no alert.
func TestLeadScansUntilLeadershipEnds(t *testing.T) {
	f := newFixture(t, PolicyReplace, []*corev1.Node{
		node("old", 10*time.Hour, taint(startup)),
		node("fine", 10*time.Hour, label("node-ready/verified", "true")),
	})
	f.c.overdue.Set(3) // as a previous leadership left it
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.c.Lead(ctx) }()

	clocktest.Await(t, f.clock, 1) // the first scan ran; the next is due an interval later
	clocktest.Step(t, f.clock, f.c.cfg.Interval-time.Millisecond, 1)
	if got := testutilScans(f, "ok"); got != 1 {
		t.Fatalf("%v scans a millisecond before the interval, want 1", got)
	}
	clocktest.Step(t, f.clock, time.Millisecond, 1)
	if got := testutilScans(f, "ok"); got != 2 {
		t.Fatalf("%v scans an interval after the first, want 2", got)
	}
	var selectors []string
	for _, a := range f.client.Actions() {
		if l, ok := a.(core.ListActionImpl); ok && l.GetResource().Resource == "nodes" {
			selectors = append(selectors, l.GetListRestrictions().Labels.String())
		}
	}
	if len(selectors) == 0 || selectors[0] != "node-ready/verified!=true" {
		t.Errorf("node lists with selectors %q, want the informer's node-ready/verified!=true first", selectors)
	}
	if f.node("old") == nil {
		t.Error("a new leader replaced a node at once: it has not watched it for a deadline")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Lead: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lead did not return after its context ended")
	}
	if g := testutil.ToFloat64(f.c.overdue); g != 0 {
		t.Errorf("overdue gauge %v after leadership ended, want 0", g)
	}
}

func TestLeadWithPolicyOffDoesNothing(t *testing.T) {
	f := newFixture(t, PolicyOff, nil)
	if err := f.c.Lead(t.Context()); err != nil || len(f.client.Actions()) != 0 {
		t.Errorf("Lead = %v with requests %v, want nil and none", err, f.actions())
	}
}
