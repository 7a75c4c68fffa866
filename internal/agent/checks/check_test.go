package checks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/clocktest"
)

type fakeCheck struct {
	name string
	run  func(ctx context.Context) error
}

func (f fakeCheck) Name() string                  { return f.name }
func (f fakeCheck) Run(ctx context.Context) error { return f.run(ctx) }

func TestRunner(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	cs := []Check{
		fakeCheck{"ok", func(context.Context) error { return nil }},
		fakeCheck{"fails", func(context.Context) error { return errors.New("fails: broken") }},
		fakeCheck{"panics", func(context.Context) error { panic("boom") }},
		// Ignores its context: the runner must still end the round at the timeout.
		fakeCheck{"hangs", func(context.Context) error { <-block; return nil }},
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(cs, 100*time.Millisecond, m)
	round := r.Run(context.Background())

	if round.Passed() {
		t.Fatal("round with failures passed")
	}
	want := map[string]string{"ok": "", "fails": "fails: broken", "panics": "panics: panic: boom", "hangs": "hangs: no answer within 100ms"}
	for i, res := range round.Results {
		if res.Name != cs[i].Name() {
			t.Errorf("result %d is %s, want %s (order kept)", i, res.Name, cs[i].Name())
		}
		w := want[res.Name]
		if (w == "") != (res.Err == nil) || (res.Err != nil && !strings.HasPrefix(res.Err.Error(), w)) {
			t.Errorf("%s: err = %v, want prefix %q", res.Name, res.Err, w)
		}
	}
	if got := strings.Join(round.Failed(), ","); got != "fails,hangs,panics" {
		t.Errorf("Failed() = %s", got)
	}
	if v := testutil.ToFloat64(r.metrics.success.WithLabelValues("ok")); v != 1 {
		t.Errorf("success{ok} = %v", v)
	}
	if v := testutil.ToFloat64(r.metrics.failures.WithLabelValues("panics")); v != 1 {
		t.Errorf("failures{panics} = %v", v)
	}
	if n := testutil.CollectAndCount(reg, "node_check_duration_seconds"); n != 4 {
		t.Errorf("%d duration series, want one per check", n)
	}
}

func TestEmptyRoundDoesNotPass(t *testing.T) {
	if (Round{}).Passed() {
		t.Error("a round with no checks passed")
	}
}

// A second registration on the same registry is an error the caller
// returns, not a panic.
func TestNewMetricsTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("second NewMetrics on one registry: no error")
	}
}

// TestRunnerGraceOnTheClock: past a check's timeout the runner waits
// timeoutGrace on its clock for the check to say why it did not finish. A
// check that honours its context (the network check names the peer that
// did not answer) is heard when it returns within the grace, however late
// a busy node wakes it; one that ignores its context ends the round with
// the runner's own "no answer", at the grace and not a millisecond sooner.
func TestRunnerGraceOnTheClock(t *testing.T) {
	for _, tt := range []struct {
		name     string
		honours  bool
		stepped  time.Duration // fake time until the check's round ends
		wantPart string
	}{
		{"honours its context, answers late", true, 0, "10.244.2.2"},
		{"ignores its context", false, timeoutGrace, "no answer within 1ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			release := make(chan struct{})
			defer close(release)
			check := fakeCheck{"network", func(ctx context.Context) error {
				if tt.honours {
					<-ctx.Done()
				}
				<-release
				return errors.New("network: pod-to-pod: 0 of 1 peers answered: tcp 10.244.2.2:8080: i/o timeout")
			}}
			round := make(chan Round, 1)
			go func() {
				round <- NewRunner([]Check{check}, time.Millisecond, nil, WithClock(fc)).Run(context.Background())
			}()
			clocktest.Await(t, fc, 1) // the timeout passed (real time): the grace's timer
			var res Result
			if tt.honours {
				release <- struct{}{} // the check wakes, late: no fake time has passed
				res = (<-round).Results[0]
			} else {
				clocktest.Step(t, fc, tt.stepped-time.Millisecond, 1)
				fc.Step(time.Millisecond)
				res = (<-round).Results[0]
			}
			if res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantPart) {
				t.Fatalf("err = %v, want it to say %q", res.Err, tt.wantPart)
			}
		})
	}
}
