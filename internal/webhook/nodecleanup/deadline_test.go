package nodecleanup

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// The deadline releases a node only after it passed and after MinAttempts
// attempts that called the critical plugins; unhealthy skips, however many,
// and time alone never do.
func TestDeadlineWaitsForRealAttempts(t *testing.T) {
	failed := cleanup.Result{Err: errors.New("px: 500"), Plugins: []cleanup.PluginResult{
		{Name: "portworx", Critical: true, Result: cleanup.ResultFailure},
		{Name: "notify", Result: cleanup.ResultUnhealthy},
	}}
	unhealthy := cleanup.Result{Err: errors.New("px: probe"), Plugins: []cleanup.PluginResult{
		{Name: "portworx", Critical: true, Result: cleanup.ResultUnhealthy},
		{Name: "log", Critical: true, Result: cleanup.ResultSuccess},
	}}
	long := metav1.NewTime(time.Now().Add(-time.Hour))
	recent := metav1.NewTime(time.Now())
	tests := []struct {
		name     string
		deleted  metav1.Time
		attempts []cleanup.Result
		want     bool
	}{
		{"first failure after an outage longer than the deadline", long, []cleanup.Result{failed}, false},
		{"unhealthy skips only, past the deadline", long, []cleanup.Result{unhealthy, unhealthy, unhealthy, unhealthy, unhealthy}, false},
		{"two real attempts among skips", long, []cleanup.Result{unhealthy, failed, unhealthy, failed, unhealthy}, false},
		{"three real attempts past the deadline", long, []cleanup.Result{failed, unhealthy, failed, failed}, true},
		{"three real attempts before the deadline", recent, []cleanup.Result{failed, failed, failed}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{cfg: Config{Deadline: 10 * time.Minute, MinAttempts: 3}, tries: map[string]tries{}}
			m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u1", DeletionTimestamp: &tt.deleted}}
			var got bool
			for _, res := range tt.attempts {
				got = c.releasable(m, c.countTry(m, res))
			}
			if got != tt.want {
				t.Errorf("releasable after %d attempts = %v, want %v", len(tt.attempts), got, tt.want)
			}
		})
	}
	t.Run("a node re-created under the name starts from zero", func(t *testing.T) {
		c := &Controller{cfg: Config{Deadline: time.Minute, MinAttempts: 2}, tries: map[string]tries{}}
		old := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u1", DeletionTimestamp: &long}}
		c.countTry(old, failed)
		renewed := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u2", DeletionTimestamp: &long}}
		if n := c.countTry(renewed, failed); n != 1 {
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
		c := &Controller{cfg: Config{Deadline: time.Minute}}
		at := metav1.NewTime(time.Now().Add(-tt.deleted))
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", DeletionTimestamp: &at}}
		if in, due := c.deadlineBeforeRetry(m, 30*time.Second); due != tt.want || due && in <= 0 {
			t.Errorf("%s: deadlineBeforeRetry = %s, %v; want due %v", tt.name, in, due, tt.want)
		}
	}
}
