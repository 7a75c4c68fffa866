package checks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// A check that honours its context and says why it did not finish (the
// network check names the peer that did not answer) is heard, even when it
// returns just after the deadline: the runner's own "no answer" is only for
// checks that ignore their context.
func TestRunnerKeepsTheErrorOfACheckThatHonoursItsDeadline(t *testing.T) {
	late := fakeCheck{"network", func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // a busy node: woken a little after the deadline
		return errors.New("network: pod-to-pod: 0 of 1 peers answered: tcp 10.244.2.2:8080: i/o timeout")
	}}
	for range 20 { // without the grace the runner's deadline wins this race every time
		res := NewRunner([]Check{late}, 10*time.Millisecond, nil).Run(context.Background()).Results[0]
		if res.Err == nil || !strings.Contains(res.Err.Error(), "10.244.2.2") {
			t.Fatalf("err = %v, want the check's own error naming the peer", res.Err)
		}
	}
}
