package nodecleanup

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// The deadline releases a node only after it passed and after MinAttempts
// failed attempts that each asked the critical plugins' systems something:
// called them, or left them out for a failed health probe newer than the
// node's previous attempt. Time alone never does, nor one stale probe
// verdict reused by many attempts; a probe that fails afresh for every
// attempt counts like a call that fails, so a receiver that is down
// cannot hold a node past the deadline (issue 35).
func TestDeadlineCountsAttemptsThatAsked(t *testing.T) {
	failed := func() cleanup.Result {
		return cleanup.Result{Err: errors.New("px: 500"), Plugins: []cleanup.PluginResult{
			{Name: "portworx", Critical: true, Result: cleanup.ResultFailure},
			{Name: "notify", Result: cleanup.ResultUnhealthy},
		}}
	}
	unhealthyAt := func(at time.Time) cleanup.Result {
		return cleanup.Result{Err: errors.New("hook: probe"), Plugins: []cleanup.PluginResult{
			{Name: "hook", Critical: true, Result: cleanup.ResultUnhealthy,
				Err: &cleanup.ProbeError{At: at, Err: errors.New("health probe failed: HTTP 503")}},
			{Name: "log", Critical: true, Result: cleanup.ResultSuccess},
		}}
	}
	// freshProbe is an attempt whose probe started just now, after any
	// earlier attempt ended; staleProbe reuses one verdict from before them all.
	freshProbe := func() cleanup.Result { return unhealthyAt(time.Now()) }
	before := time.Now().Add(-time.Second)
	staleProbe := func() cleanup.Result { return unhealthyAt(before) }
	noVerdictTime := func() cleanup.Result {
		return cleanup.Result{Err: errors.New("hook: probe"), Plugins: []cleanup.PluginResult{
			{Name: "hook", Critical: true, Result: cleanup.ResultUnhealthy, Err: errors.New("health probe failed")}}}
	}
	long := metav1.NewTime(time.Now().Add(-time.Hour))
	recent := metav1.NewTime(time.Now())
	type attempt func() cleanup.Result
	tests := []struct {
		name     string
		deleted  metav1.Time
		attempts []attempt
		want     bool
	}{
		{"first failure after an outage longer than the deadline", long, []attempt{failed}, false},
		{"three attempts, each on a fresh failed probe, past the deadline", long, []attempt{freshProbe, freshProbe, freshProbe}, true},
		{"two fresh failed probes past the deadline", long, []attempt{freshProbe, freshProbe}, false},
		{"one stale verdict reused by five attempts", long, []attempt{staleProbe, staleProbe, staleProbe, staleProbe, staleProbe}, false},
		{"a verdict without its time is no answer", long, []attempt{noVerdictTime, noVerdictTime, noVerdictTime}, false},
		{"calls and fresh probes mixed", long, []attempt{failed, freshProbe, failed}, true},
		{"three real attempts past the deadline", long, []attempt{failed, failed, failed}, true},
		{"three real attempts before the deadline", recent, []attempt{failed, failed, failed}, false},
		{"three fresh probes before the deadline", recent, []attempt{freshProbe, freshProbe, freshProbe}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{clock: clock.RealClock{}, cfg: Config{Deadline: 10 * time.Minute, MinAttempts: 3}, tries: map[string]tries{}}
			m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u1", DeletionTimestamp: &tt.deleted}}
			var got bool
			for _, a := range tt.attempts {
				got = c.releasable(m, c.countTry(m, a()))
			}
			if got != tt.want {
				t.Errorf("releasable after %d attempts = %v, want %v", len(tt.attempts), got, tt.want)
			}
		})
	}
	t.Run("a node re-created under the name starts from zero", func(t *testing.T) {
		c := &Controller{clock: clock.RealClock{}, cfg: Config{Deadline: time.Minute, MinAttempts: 2}, tries: map[string]tries{}}
		old := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u1", DeletionTimestamp: &long}}
		c.countTry(old, failed())
		renewed := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u2", DeletionTimestamp: &long}}
		if !c.lastTry(renewed).IsZero() {
			t.Error("the new incarnation inherits the old one's last attempt")
		}
		if n := c.countTry(renewed, failed()); n != 1 {
			t.Errorf("tries of the new incarnation = %d, want 1", n)
		}
	})
}

// A node past its deadline but still short of real attempts is retried on
// its backoff, not at once again and again.
func TestDeadlineBeforeRetry(t *testing.T) {
	for _, tt := range []struct {
		name    string
		deleted time.Duration // ago
		want    bool
	}{
		{"deadline before the retry", 50 * time.Second, true},
		{"deadline after the retry", 0, false},
		{"deadline passed: the backoff rules", 2 * time.Minute, false},
	} {
		c := &Controller{clock: clock.RealClock{}, cfg: Config{Deadline: time.Minute}}
		at := metav1.NewTime(time.Now().Add(-tt.deleted))
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", DeletionTimestamp: &at}}
		if in, due := c.deadlineBeforeRetry(m, 30*time.Second); due != tt.want || due && in <= 0 {
			t.Errorf("%s: deadlineBeforeRetry = %s, %v; want due %v", tt.name, in, due, tt.want)
		}
	}
}
