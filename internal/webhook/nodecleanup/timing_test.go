package nodecleanup

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/clocktest"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// TestCleanupTimingOnTheClock: the cleanup's timing rules through Lead, its
// workqueue and its worker, on a fake clock. A critical plugin that keeps
// failing is retried on the backoff (--cleanup-retry-base, doubling, at
// most --cleanup-retry-max); the node is released at the deadline
// (--cleanup-deadline, from its deletionTimestamp) even when the next retry
// would come later, and only after --cleanup-deadline-min-attempts failed
// attempts: a node deleted long before the webhook came back is released
// by its third attempt, not its first. Each attempt is stepped to: a
// millisecond before it is due nothing runs, at the instant it does.
func TestCleanupTimingOnTheClock(t *testing.T) {
	tests := []struct {
		name                string
		deletedAgo          time.Duration
		deadline, base, max time.Duration
		// due are the attempts' times from the first one; the last releases.
		due []time.Duration
	}{
		{name: "backoff 1 s, 2 s, then the deadline before the retry due at 7 s",
			deadline: 5 * time.Second, base: time.Second, max: 30 * time.Second,
			due: []time.Duration{0, time.Second, 3 * time.Second, 5 * time.Second}},
		{name: "deleted an hour before the webhook came back: released by the third attempt",
			deletedAgo: time.Hour, deadline: 2 * time.Second, base: 200 * time.Millisecond, max: 400 * time.Millisecond,
			due: []time.Duration{0, 200 * time.Millisecond, 600 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			n := meta("n", finalizers("a/b", fin), func(m *metav1.PartialObjectMetadata) {
				ts := metav1.NewTime(fc.Now().Add(-tt.deletedAgo))
				m.DeletionTimestamp = &ts
			})
			f := newServingFixture(t, func(c *Config) {
				c.Backfill, c.Clock = false, fc
				c.Deadline, c.MinAttempts, c.RetryBase, c.RetryMax = tt.deadline, 3, tt.base, tt.max
			}, n)
			// The fake API server keeps an object's resourceVersion on a
			// write, so the informer would take the status annotation's
			// write for a resync and queue the node again at once (a real
			// API server changes it). The status is for people, this test is
			// about time: its writes are refused.
			f.client.PrependReactor("patch", "nodes", func(a core.Action) (bool, runtime.Object, error) {
				if a.(core.PatchActionImpl).GetPatchType() == types.MergePatchType {
					return true, nil, errBoom
				}
				return false, nil, nil
			})
			p := &plugin{name: "portworx", err: errBoom}
			f.pipeline = pipelineOf([]*plugin{p})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			f.factory.Start(ctx.Done())
			go func() { done <- f.c.Lead(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Lead: %v", err)
				}
				f.factory.Shutdown()
			}()

			// Idle between attempts: the queue's heartbeat and the retry's
			// timer. While a first attempt runs, its status timer makes the
			// same count (a fresh-clone run saw 2 waiters and no attempt
			// made): an attempt is awaited on its Event, recorded once that
			// timer is stopped, then on the retry's timer.
			const idle = 2
			attempted := func(n int) {
				t.Helper()
				clocktest.Until(t, fmt.Sprintf("attempt %d's Event", n), func() bool { return len(f.events.Events) >= n+1 })
				clocktest.Await(t, fc, idle)
			}
			attempted(1)
			if got := len(p.calls()); got != 1 {
				t.Fatalf("%d attempts at once, want 1", got)
			}
			last := len(tt.due) - 1
			for i := 1; i <= last; i++ {
				clocktest.Step(t, fc, tt.due[i]-tt.due[i-1]-time.Millisecond, idle)
				if got := len(p.calls()); got != i {
					t.Fatalf("%d attempts %s before attempt %d is due, want %d", got, time.Millisecond, i+1, i)
				}
				if i < last {
					fc.Step(time.Millisecond)
					attempted(i + 1)
					if got := len(p.calls()); got != i+1 {
						t.Fatalf("%d attempts at %s, want %d", got, tt.due[i], i+1)
					}
					if fs := f.finalizers("n"); !slices.Contains(fs, fin) {
						t.Fatalf("released by attempt %d, want attempt %d", i+1, last+1)
					}
					continue
				}
				fc.Step(time.Millisecond)
				if fc.Waiters() == idle {
					t.Fatalf("no attempt due at %s, want the last one", tt.due[i])
				}
				// The release's Event is its last act.
				clocktest.Until(t, "the release's Event", func() bool { return len(f.events.Events) == len(tt.due)+1 })
			}
			if fs := f.finalizers("n"); slices.Contains(fs, fin) {
				t.Errorf("finalizers %q after the last attempt, want ours removed", fs)
			}
			if got := len(p.calls()); got != len(tt.due) {
				t.Errorf("%d attempts, want %d", got, len(tt.due))
			}
			if f.count("deadline_exceeded") != 1 {
				t.Errorf("node_cleanup_nodes_total{deadline_exceeded} = %v, want 1", f.count("deadline_exceeded"))
			}
			want := []string{api.EventCleanupStarted}
			for range last {
				want = append(want, api.EventCleanupFailed)
			}
			f.expectEvents(append(want, api.EventCleanupDeadlineExceeded)...)
		})
	}
}

// gatedPlugin succeeds once release is closed.
type gatedPlugin struct {
	name    string
	release chan struct{}
}

func (p *gatedPlugin) Name() string                { return p.name }
func (p *gatedPlugin) ShouldRun(*corev1.Node) bool { return true }
func (p *gatedPlugin) Cleanup(ctx context.Context, _ *corev1.Node) error {
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestSlowFirstAttemptShowsItsStatusOnTheClock: a first attempt still
// running statusDelay after it started shows its progress on the node (the
// slow plugin running), not a millisecond sooner; one that ends sooner
// writes no status at all.
func TestSlowFirstAttemptShowsItsStatusOnTheClock(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newFixture(t, func(c *Config) { c.Clock = fc }, deleting("slow"), deleting("fast"))
	hook := &gatedPlugin{name: "hook", release: make(chan struct{})}
	f.pipeline = cleanup.NewPipeline([]cleanup.Stage{
		{Plugin: hook, Spec: cleanup.Spec{Enabled: true, Critical: true, Timeout: time.Hour}},
	}, false, nil, slog.New(slog.DiscardHandler))
	writes := func() float64 { return testutil.ToFloat64(f.c.statusWrites) }

	done := make(chan error, 1)
	go func() { done <- f.c.syncCleanup(t.Context(), "slow", 0) }()
	clocktest.Await(t, fc, 1) // the status's timer
	clocktest.Step(t, fc, statusDelay-time.Millisecond, 1)
	if got := writes(); got != 0 {
		t.Fatalf("%v status writes a millisecond before %s, want 0", got, statusDelay)
	}
	fc.Step(time.Millisecond) // runs the timer's function
	if got := writes(); got != 1 {
		t.Fatalf("%v status writes at %s, want 1", got, statusDelay)
	}
	if s := f.statusOf("slow"); s.Attempt != 1 || s.Plugins["hook"] != "running" {
		t.Errorf("status %+v, want attempt 1 with hook running", s)
	}
	close(hook.release)
	if err := <-done; err != nil {
		t.Fatalf("slow cleanup: %v", err)
	}

	before := writes()
	if err := f.c.syncCleanup(t.Context(), "fast", 0); err != nil {
		t.Fatalf("fast cleanup: %v", err)
	}
	if got := writes() - before; got != 0 || fc.HasWaiters() {
		t.Errorf("a first attempt done at once wrote the status %v times and left %d timers, want 0 and 0", got, fc.Waiters())
	}
}
