package cleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// HealthChecker is implemented by plugins that can tell whether the system
// they act on answers (Portworx's API, a notification or hook receiver)
// without changing anything. Health must be cheap and side-effect free.
type HealthChecker interface {
	Health(ctx context.Context) error
}

// healthTimeout bounds one probe (a stage's own timeout, if shorter).
const healthTimeout = 10 * time.Second

// ProbeError is the verdict of a failed health probe: why, and when the
// probe started. A cleanup attempt that leaves a plugin out for it asked
// the plugin's system at that moment; the cleanup deadline counts such an
// attempt only when its probe started after the node's previous attempt
// (Result.AskedSince), so every attempt it counts rests on an answer of
// its own.
type ProbeError struct {
	// At is when the probe that failed started.
	At time.Time
	// Err says why it failed.
	Err error
}

func (e *ProbeError) Error() string { return e.Err.Error() }
func (e *ProbeError) Unwrap() error { return e.Err }

// Health probes the plugins of the running pipeline that offer a probe:
// periodically (Watch) and before a cleanup starts (Unhealthy). Its verdict
// is a metric, a log line and an Event on each change; it never touches the
// webhook's readiness, since admission does not depend on any plugin.
type Health struct {
	// OnChange, if set, hears each plugin's change of state (err nil:
	// healthy again); the first probe of a healthy plugin is no change.
	OnChange func(plugin string, err error)

	timeout time.Duration // bound of one probe (healthTimeout)
	clock   clock.WithTicker

	mu      sync.Mutex
	state   map[string]error // last verdict per plugin (a *ProbeError when it failed)
	probed  time.Time        // when the last full probe finished
	probing chan struct{}    // closed when the probe in flight ends

	healthy *prometheus.GaugeVec
	probes  *prometheus.CounterVec
}

// NewHealth registers node_cleanup_plugin_healthy{plugin} and
// node_cleanup_plugin_health_probes_total{plugin,result} on reg (nil:
// unregistered). clk dates the probes and paces Watch (nil: the real clock).
func NewHealth(reg prometheus.Registerer, clk clock.WithTicker) (*Health, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	h := &Health{
		timeout: healthTimeout,
		clock:   clk,
		state:   map[string]error{},
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "node_cleanup_plugin_healthy",
			Help: "1 when the last health probe of a cleanup plugin that offers one passed, 0 when it failed.",
		}, []string{"plugin"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_cleanup_plugin_health_probes_total",
			Help: "Health probes of cleanup plugins by plugin and result (success, failure).",
		}, []string{"plugin", "result"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{h.healthy, h.probes} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("cleanup: register health metrics: %w", err)
			}
		}
	}
	return h, nil
}

// Watch probes the pipeline current() returns every interval until ctx ends.
func (h *Health) Watch(ctx context.Context, interval time.Duration, current func() *Pipeline) {
	t := h.clock.NewTicker(interval)
	defer t.Stop()
	for {
		h.Probe(ctx, current())
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Unhealthy returns the plugins of p whose probe fails, each error a
// *ProbeError. It probes first unless a probe finished within maxAge (so a
// mass scale-in probes each receiver a few times, not once per node) and
// every failed verdict comes from a probe started at or after since — the
// end of the node's previous attempt, zero for none: an attempt that
// leaves a plugin out then always rests on an answer newer than the last
// attempt's, so a node retried every few seconds gets a new probe each
// time while its receiver stays down (still one probe for every node
// waiting at that moment). Concurrent callers share one probe.
func (h *Health) Unhealthy(ctx context.Context, p *Pipeline, maxAge time.Duration, since time.Time) map[string]error {
	if h == nil || p == nil || !p.hasHealth() {
		return nil
	}
	// Twice at most: the probe in flight, which Probe waits for, may have
	// started before since; one started after that wait cannot have.
	for range 2 {
		if !h.stale(p, maxAge, since) || ctx.Err() != nil {
			break
		}
		// Judged stale again as the probe would start: a cleanup that found
		// the verdicts stale while another's probe ran does not start a
		// second one once that probe has answered.
		h.probe(ctx, p, func() bool { return h.staleLocked(p, maxAge, since) })
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]error{}
	for _, s := range p.stages {
		if err := h.state[s.Plugin.Name()]; err != nil {
			out[s.Plugin.Name()] = err
		}
	}
	return out
}

// stale reports whether p's verdicts need a new probe: the last one
// finished maxAge ago or more, or a failed verdict is older than since.
func (h *Health) stale(p *Pipeline, maxAge time.Duration, since time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.staleLocked(p, maxAge, since)
}

// staleLocked is stale with h.mu held.
func (h *Health) staleLocked(p *Pipeline, maxAge time.Duration, since time.Time) bool {
	if h.clock.Since(h.probed) >= maxAge {
		return true
	}
	for _, s := range p.stages {
		var pe *ProbeError
		if err := h.state[s.Plugin.Name()]; errors.As(err, &pe) && pe.At.Before(since) {
			return true
		}
	}
	return false
}

// Probe runs every probe of p once, in parallel.
func (h *Health) Probe(ctx context.Context, p *Pipeline) {
	h.probe(ctx, p, nil)
}

// probe is Probe; with need, only while need (called with h.mu held) says
// a probe is still needed.
func (h *Health) probe(ctx context.Context, p *Pipeline, need func() bool) {
	if h == nil || p == nil {
		return
	}
	h.mu.Lock()
	if need != nil && !need() {
		h.mu.Unlock()
		return
	}
	if h.probing != nil {
		wait := h.probing
		h.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
		}
		return
	}
	done := make(chan struct{})
	h.probing = done
	h.mu.Unlock()
	started := h.clock.Now()

	type verdict struct {
		name string
		err  error
	}
	results := make(chan verdict, len(p.stages))
	// A probe shared by many cleanups must not end with the one whose
	// attempt happened to start it: only the process stopping ends it early.
	probeCtx := context.WithoutCancel(ctx)
	bound := h.timeout
	var pending []string
	for _, s := range p.stages {
		hc, ok := s.Plugin.(HealthChecker)
		if !ok {
			continue
		}
		pending = append(pending, s.Plugin.Name())
		go func() {
			timeout := bound
			if s.Timeout > 0 && s.Timeout < timeout {
				timeout = s.Timeout
			}
			pctx, cancel := context.WithTimeout(probeCtx, timeout)
			defer cancel()
			_, err := guard(func() (bool, error) { return false, hc.Health(pctx) })
			if err != nil {
				err = &ProbeError{At: started, Err: fmt.Errorf("health probe failed: %s", describe(err))}
			}
			results <- verdict{s.Plugin.Name(), err}
		}()
	}
	// A probe that ignores its context is not waited for past its timeout
	// (and a little): it counts as failed, as a hung Cleanup does.
	deadline := h.clock.NewTimer(bound + 2*time.Second)
	defer deadline.Stop()
	var collected []verdict
collect:
	for len(collected) < len(pending) {
		select {
		case v := <-results:
			collected = append(collected, v)
		case <-deadline.C():
			for _, name := range pending {
				if !slices.ContainsFunc(collected, func(v verdict) bool { return v.name == name }) {
					collected = append(collected, verdict{name, &ProbeError{At: started, Err: fmt.Errorf("health probe failed: no answer within %s", bound)}})
				}
			}
			break collect
		}
	}
	var changes []verdict
	for _, v := range collected {
		result, gauge := "success", 1.0
		if v.err != nil {
			result, gauge = "failure", 0
		}
		h.probes.WithLabelValues(v.name, result).Inc()
		h.healthy.WithLabelValues(v.name).Set(gauge)
		h.mu.Lock()
		prev, seen := h.state[v.name]
		h.state[v.name] = v.err
		h.mu.Unlock()
		if (prev == nil) != (v.err == nil) || (v.err != nil && !seen) {
			changes = append(changes, v)
		}
	}
	h.mu.Lock()
	h.probing = nil
	if ctx.Err() == nil {
		h.probed = h.clock.Now()
	}
	h.mu.Unlock()
	close(done)
	if h.OnChange != nil {
		for _, c := range changes {
			h.OnChange(c.name, c.err)
		}
	}
}

func (p *Pipeline) hasHealth() bool {
	for _, s := range p.stages {
		if _, ok := s.Plugin.(HealthChecker); ok {
			return true
		}
	}
	return false
}
