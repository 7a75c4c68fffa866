// Package checks holds the node verification checks and the runner that times
// them. A check only answers "does this work from here?"; the runner owns
// concurrency, timeouts, metrics and panics. What a gate is (Gate,
// GateConfig) is here too; the gates themselves are package gates.
package checks

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// Check is one verification of the node's environment.
type Check interface {
	// Name is the stable identifier used in flags, logs and metric labels.
	Name() string
	// Run returns nil when the check passes, or an error that says what failed and where.
	Run(ctx context.Context) error
}

// Result is the outcome of one check in one round.
type Result struct {
	// Name is the check's name.
	Name string
	// Err is nil when the check passed.
	Err error
	// Duration is how long the check took.
	Duration time.Duration
}

// Round is the outcome of running every enabled check once.
type Round struct {
	// Results holds one entry per check, in the order the checks were given.
	Results []Result
	// Duration is the wall time of the round (the slowest check).
	Duration time.Duration
}

// Passed reports whether every check in the round passed.
func (r Round) Passed() bool {
	for _, res := range r.Results {
		if res.Err != nil {
			return false
		}
	}
	return len(r.Results) > 0
}

// Failed returns the names of the checks that failed, sorted.
func (r Round) Failed() []string {
	var names []string
	for _, res := range r.Results {
		if res.Err != nil {
			names = append(names, res.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Summary is a one-line description of the failures, for logs and Events.
func (r Round) Summary() string {
	var parts []string
	for _, res := range r.Results {
		if res.Err != nil {
			parts = append(parts, res.Err.Error())
		}
	}
	if len(parts) == 0 {
		return "all checks passed"
	}
	return strings.Join(parts, "; ")
}

// Metrics are the per-check series the runner maintains.
type Metrics struct {
	duration *prometheus.HistogramVec
	failures *prometheus.CounterVec
	success  *prometheus.GaugeVec
	// degraded counts the backends of a shared Service a check found
	// failing while others answered (BackendReport sets it).
	degraded *prometheus.GaugeVec
}

// NewMetrics registers the check metrics on reg; it fails when one of them is
// already there.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "node_check_duration_seconds",
			Help:    "Duration of each verification check.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"check"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_check_failures_total",
			Help: "Failed runs of each verification check.",
		}, []string{"check"}),
		success: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "node_check_success",
			Help: "Whether the last run of each verification check passed (1) or failed (0).",
		}, []string{"check"}),
		degraded: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "node_check_degraded_backends",
			Help: "Endpoints of a shared Service (the cluster DNS) the check found failing while others answered, in the last 10 minutes: broken backends elsewhere, not counted against this node.",
		}, []string{"check"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.failures, m.success, m.degraded} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("checks: register metrics: %w", err)
		}
	}
	return m, nil
}

// Runner runs a fixed set of checks concurrently, each under its own timeout.
type Runner struct {
	checks  []Check
	timeout time.Duration
	metrics *Metrics
	// clock times the grace past a check's timeout (timeoutGrace); the
	// timeout itself is the check's context's.
	clock clock.WithTicker
}

// RunnerOption changes how a Runner runs.
type RunnerOption func(*Runner)

// WithClock has the runner wait out the grace past a check's timeout on
// clk instead of the real clock.
func WithClock(clk clock.WithTicker) RunnerOption {
	return func(r *Runner) { r.clock = clk }
}

// NewRunner returns a runner for checks; metrics may be nil.
func NewRunner(checks []Check, timeout time.Duration, metrics *Metrics, opts ...RunnerOption) *Runner {
	if metrics != nil {
		// Failure counters exist from the start (rate() needs the zero); the
		// success gauge appears with the first result, so 0 always means failed.
		for _, c := range checks {
			metrics.failures.WithLabelValues(c.Name())
		}
	}
	r := &Runner{checks: checks, timeout: timeout, metrics: metrics, clock: clock.RealClock{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Run runs every check once; the round takes as long as its slowest check.
func (r *Runner) Run(ctx context.Context) Round {
	start := time.Now()
	results := make([]Result, len(r.checks))
	var wg sync.WaitGroup
	for i, c := range r.checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.runOne(ctx, c)
		}()
	}
	wg.Wait()
	return Round{Results: results, Duration: time.Since(start)}
}

// timeoutGrace is how long past its timeout the runner waits for a check
// that honours its context to say why it did not finish.
const timeoutGrace = 250 * time.Millisecond

func (r *Runner) runOne(ctx context.Context, c Check) (res Result) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	start := time.Now()
	res.Name = c.Name()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("%s: panic: %v\n%s", c.Name(), p, debug.Stack())
			}
		}()
		done <- c.Run(ctx)
	}()
	// A check that ignores its context must not hold the round past its
	// timeout. One that honours it returns as the context ends, with an
	// error that says what did not answer (the network check names the
	// peer): a short grace lets that error win the race against the
	// deadline on a busy node instead of the runner's own.
	select {
	case res.Err = <-done:
	case <-ctx.Done():
		grace := r.clock.NewTimer(timeoutGrace)
		defer grace.Stop()
		select {
		case res.Err = <-done:
		case <-grace.C():
			res.Err = fmt.Errorf("%s: no answer within %s: %w", c.Name(), r.timeout, ctx.Err())
		}
	}
	res.Duration = time.Since(start)
	if r.metrics != nil {
		r.metrics.duration.WithLabelValues(res.Name).Observe(res.Duration.Seconds())
		if res.Err != nil {
			r.metrics.failures.WithLabelValues(res.Name).Inc()
			r.metrics.success.WithLabelValues(res.Name).Set(0)
		} else {
			r.metrics.success.WithLabelValues(res.Name).Set(1)
		}
	}
	return res
}
