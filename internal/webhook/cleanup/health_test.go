package cleanup

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/clocktest"
)

// probed is a fake plugin with a scripted health probe.
type probed struct {
	fake
	mu     sync.Mutex
	err    error
	probes atomic.Int32
}

func (p *probed) Health(context.Context) error {
	p.probes.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *probed) set(err error) { p.mu.Lock(); p.err = err; p.mu.Unlock() }

func TestHealthVerdictsMetricsAndChanges(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := NewHealth(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	h.OnChange = func(plugin string, err error) {
		if err != nil {
			changes = append(changes, plugin+" down: "+err.Error())
		} else {
			changes = append(changes, plugin+" up")
		}
	}
	px := &probed{fake: fake{name: "portworx"}}
	quiet := &fake{name: "log"} // no probe
	p := NewPipeline([]Stage{stage(px, true), stage(quiet, false)}, false, nil, slog.New(slog.DiscardHandler))

	h.Probe(context.Background(), p)
	if got := testutil.ToFloat64(h.healthy.WithLabelValues("portworx")); got != 1 {
		t.Errorf("healthy{portworx} = %v, want 1", got)
	}
	px.set(errors.New("HTTP 503"))
	h.Probe(context.Background(), p)
	h.Probe(context.Background(), p) // still down: no second change
	px.set(nil)
	h.Probe(context.Background(), p)
	want := []string{"portworx down: health probe failed: HTTP 503", "portworx up"}
	if strings.Join(changes, "|") != strings.Join(want, "|") {
		t.Errorf("changes %q, want %q", changes, want)
	}
	if got := testutil.ToFloat64(h.probes.WithLabelValues("portworx", "failure")); got != 2 {
		t.Errorf("probes{failure} = %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(reg, "node_cleanup_plugin_healthy"); err != nil || n != 1 {
		t.Errorf("node_cleanup_plugin_healthy series = %d (%v), want 1: only plugins with a probe", n, err)
	}
}

// Before a cleanup: a verdict younger than maxAge is reused, an older one
// probed again; many concurrent cleanups share one probe.
func TestUnhealthyReusesFreshVerdicts(t *testing.T) {
	h, _ := NewHealth(nil, nil)
	px := &probed{fake: fake{name: "portworx"}, err: errors.New("down")}
	p := NewPipeline([]Stage{stage(px, true)}, false, nil, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if u := h.Unhealthy(context.Background(), p, time.Minute, time.Time{}); u["portworx"] == nil {
				t.Error("portworx not reported unhealthy")
			}
		})
	}
	wg.Wait()
	if n := px.probes.Load(); n != 1 {
		t.Errorf("%d probes for 50 cleanups within maxAge, want 1", n)
	}
	px.set(nil)
	if u := h.Unhealthy(context.Background(), p, 0, time.Time{}); len(u) != 0 {
		t.Errorf("after recovery and a stale verdict: %v", u)
	}
	var nilHealth *Health
	if u := nilHealth.Unhealthy(context.Background(), p, time.Minute, time.Time{}); u != nil {
		t.Errorf("probing off reports %v", u)
	}
}

// A failed verdict older than the node's previous attempt (since) is probed
// again even within maxAge, so each attempt that leaves a plugin out rests
// on a probe of its own; the verdict carries when its probe started. A
// healthy verdict within maxAge is reused whatever since says, and
// cleanups that want the same freshness share one probe.
func TestUnhealthyProbesAgainForANewAttempt(t *testing.T) {
	h, _ := NewHealth(nil, nil)
	px := &probed{fake: fake{name: "hook"}, err: errors.New("HTTP 503")}
	p := NewPipeline([]Stage{stage(px, true)}, false, nil, slog.New(slog.DiscardHandler))
	first := h.Unhealthy(context.Background(), p, time.Minute, time.Time{})
	var pe *ProbeError
	if !errors.As(first["hook"], &pe) || pe.At.IsZero() {
		t.Fatalf("verdict %v, want a *ProbeError with the probe's start", first["hook"])
	}
	if n := px.probes.Load(); n != 1 {
		t.Fatalf("%d probes, want 1", n)
	}
	// Same attempt freshness: the verdict is reused.
	h.Unhealthy(context.Background(), p, time.Minute, pe.At)
	if n := px.probes.Load(); n != 1 {
		t.Errorf("%d probes after asking with since = the probe's start, want 1 (reused)", n)
	}
	// The node's previous attempt ended after that probe: probe again, and
	// once for every cleanup asking at that moment.
	ended := time.Now()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			u := h.Unhealthy(context.Background(), p, time.Minute, ended)
			var got *ProbeError
			if !errors.As(u["hook"], &got) || got.At.Before(ended) {
				t.Errorf("verdict %v, want one probed after %s", u["hook"], ended)
			}
		})
	}
	wg.Wait()
	if n := px.probes.Load(); n != 2 {
		t.Errorf("%d probes after 20 cleanups wanting a verdict newer than their last attempt, want 2", n)
	}
	// Healthy: the verdict is reused within maxAge.
	px.set(nil)
	h.Probe(context.Background(), p)
	h.Unhealthy(context.Background(), p, time.Minute, time.Now())
	if n := px.probes.Load(); n != 3 {
		t.Errorf("%d probes, want 3: a healthy verdict within maxAge is not probed again", n)
	}
}

// AskedSince: an attempt asked a critical plugin when it called it, or
// left it out on a probe that started at or after since.
func TestAskedSince(t *testing.T) {
	now := time.Now()
	unhealthy := func(critical bool, err error) Result {
		return Result{Plugins: []PluginResult{{Name: "hook", Critical: critical, Result: ResultUnhealthy, Err: err}}}
	}
	tests := []struct {
		name string
		r    Result
		want bool
	}{
		{"called and failed", Result{Plugins: []PluginResult{{Name: "px", Critical: true, Result: ResultFailure}}}, true},
		{"probe started after since", unhealthy(true, &ProbeError{At: now, Err: errors.New("down")}), true},
		{"probe started before since", unhealthy(true, &ProbeError{At: now.Add(-time.Second), Err: errors.New("down")}), false},
		{"no probe time", unhealthy(true, errors.New("down")), false},
		{"optional plugin left out", unhealthy(false, errors.New("down")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.AskedSince(now); got != tt.want {
				t.Errorf("AskedSince = %v, want %v", got, tt.want)
			}
		})
	}
}

// An unhealthy plugin is not called: it fails at once (a critical one fails
// the attempt, and what runs after it is skipped); the others run.
func TestPipelineDoesNotRunUnhealthyPlugins(t *testing.T) {
	var called atomic.Int32
	px := &fake{name: "portworx", run: func(context.Context) error { called.Add(1); return nil }}
	after := &fake{name: "notify"}
	other := &fake{name: "volumeattachments"}
	p := NewPipeline([]Stage{stage(px, true), stage(after, false, "portworx"), stage(other, true)}, false, nil, slog.New(slog.DiscardHandler))
	r := p.RunObserved(context.Background(), testNode, 1, map[string]error{"portworx": errors.New("health probe failed: HTTP 503")}, nil)
	if called.Load() != 0 {
		t.Error("the unhealthy plugin was called")
	}
	got := results(r)
	if got["portworx"] != ResultUnhealthy || got["notify"] != ResultSkipped || got["volumeattachments"] != ResultSuccess {
		t.Errorf("results %v", got)
	}
	if r.Err == nil || !strings.Contains(r.Err.Error(), "portworx: health probe failed: HTTP 503") {
		t.Errorf("attempt error %v, want the critical plugin's probe failure", r.Err)
	}
}

// hung ignores its context.
type hung struct{ fake }

func (*hung) Health(context.Context) error { select {} }

// A probe that never returns fails after the probe timeout (and 2 s)
// instead of blocking every cleanup that waits for the verdict: on a fake
// clock, not a millisecond before.
func TestHungProbeFailsInsteadOfBlocking(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, _ := NewHealth(nil, fc)
	h.timeout = 200 * time.Millisecond
	p := NewPipeline([]Stage{stage(&hung{fake: fake{name: "stuck"}}, true)}, false, nil, slog.New(slog.DiscardHandler))
	got := make(chan map[string]error, 1)
	go func() { got <- h.Unhealthy(context.Background(), p, time.Minute, time.Time{}) }()
	clocktest.Await(t, fc, 1) // the probe's bound
	clocktest.Step(t, fc, h.timeout+2*time.Second-time.Millisecond, 1)
	select {
	case u := <-got:
		t.Fatalf("verdict %v a millisecond before the probe's bound", u)
	default:
	}
	fc.Step(time.Millisecond)
	if u := <-got; u["stuck"] == nil || !strings.Contains(u["stuck"].Error(), "no answer within") {
		t.Errorf("verdict %v, want no answer", u)
	}
}

// TestHealthOnTheClock: Watch probes at once and then every interval; a
// cleanup reuses a verdict younger than maxAge and probes again once it is
// that old; Watch ends with its context, leaving nothing running.
func TestHealthOnTheClock(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, _ := NewHealth(nil, fc)
	px := &probed{fake: fake{name: "portworx"}, err: errors.New("down")}
	p := NewPipeline([]Stage{stage(px, true)}, false, nil, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Watch(ctx, time.Minute, func() *Pipeline { return p }); close(done) }()

	clocktest.Until(t, "the first probe", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return !h.probed.IsZero() && h.probing == nil
	})
	clocktest.Await(t, fc, 1) // Watch's ticker
	if n := px.probes.Load(); n != 1 {
		t.Fatalf("%d probes when Watch started, want 1", n)
	}
	clocktest.Step(t, fc, time.Minute-time.Millisecond, 1)
	if n := px.probes.Load(); n != 1 {
		t.Fatalf("%d probes a millisecond before the interval, want 1", n)
	}
	fc.Step(time.Millisecond)
	clocktest.Until(t, "the second periodic probe", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return px.probes.Load() == 2 && h.probing == nil && h.probed.Equal(fc.Now())
	})

	// A cleanup 10 s after that probe, with maxAge 10 s: probed again; 1 ms
	// sooner, the verdict is reused.
	clocktest.Step(t, fc, 10*time.Second-time.Millisecond, 1)
	h.Unhealthy(ctx, p, 10*time.Second, time.Time{})
	if n := px.probes.Load(); n != 2 {
		t.Errorf("%d probes for a cleanup within maxAge of the last, want 2 (reused)", n)
	}
	clocktest.Step(t, fc, time.Millisecond, 1)
	h.Unhealthy(ctx, p, 10*time.Second, time.Time{})
	if n := px.probes.Load(); n != 3 {
		t.Errorf("%d probes for a cleanup maxAge after the last, want 3", n)
	}
	cancel()
	<-done
}
