package cleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

// Outcomes of one plugin in one attempt; they are the `result` label.
const (
	ResultSuccess = "success" // Cleanup returned nil
	ResultFailure = "failure" // Cleanup returned an error
	ResultTimeout = "timeout" // Cleanup outlived its timeout
	ResultPanic   = "panic"   // Cleanup panicked
	ResultSkipped = "skipped" // ShouldRun said no, a critical plugin it runs after failed, or Cleanup returned *Skip
	ResultDryRun  = "dry_run" // Cleanup ran in dry-run mode and returned nil
	// ResultUnhealthy: not run because the plugin's health probe failed just
	// before; a failure like any other (a critical one holds the node).
	ResultUnhealthy = "unhealthy"
)

// Stage is one enabled plugin with its settings.
type Stage struct {
	Plugin Plugin
	Spec
}

// Pipeline runs a fixed set of stages; build a new one when the configuration changes.
type Pipeline struct {
	stages  []Stage
	dryRun  bool
	metrics *Metrics
	log     *slog.Logger
}

// PluginResult is one stage's outcome in one attempt.
type PluginResult struct {
	Name     string
	Critical bool
	Result   string
	Err      error
	Duration time.Duration
}

// Failed reports whether the stage ended in an error of any kind.
func (r PluginResult) Failed() bool {
	return r.Result == ResultFailure || r.Result == ResultTimeout || r.Result == ResultPanic || r.Result == ResultUnhealthy
}

// Result is one attempt's outcome.
type Result struct {
	// Plugins in the order they finished.
	Plugins []PluginResult
	// Err joins the critical failures; nil means the finalizer may go.
	Err error
}

// OptionalFailures are the optional plugins that failed.
func (r Result) OptionalFailures() []PluginResult {
	var out []PluginResult
	for _, p := range r.Plugins {
		if p.Failed() && !p.Critical {
			out = append(out, p)
		}
	}
	return out
}

// AskedSince reports whether the attempt asked the system behind every
// critical plugin something at or after since: it called the plugin, or
// left it out for a health probe (a *ProbeError) that started then. The
// cleanup deadline counts such attempts only, with since the end of the
// node's previous counted attempt: a node is released only after that many
// answers of its own — failures, refusals or failed probes — never on
// time alone, nor on one stale verdict reused by several attempts.
func (r Result) AskedSince(since time.Time) bool {
	for _, p := range r.Plugins {
		if !p.Critical || p.Result != ResultUnhealthy {
			continue
		}
		var pe *ProbeError
		if !errors.As(p.Err, &pe) || pe.At.Before(since) {
			return false
		}
	}
	return true
}

// Summary is a one-line account of the attempt for Events and logs.
func (r Result) Summary() string {
	parts := make([]string, 0, len(r.Plugins))
	for _, p := range r.Plugins {
		parts = append(parts, fmt.Sprintf("%s=%s", p.Name, p.Result))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// NewPipeline builds a pipeline from stages; a stage's After may name
// plugins that are not among stages (disabled ones): those are ignored.
func NewPipeline(stages []Stage, dryRun bool, metrics *Metrics, log *slog.Logger) *Pipeline {
	return &Pipeline{stages: stages, dryRun: dryRun, metrics: metrics, log: log}
}

// Build turns a configuration into a pipeline using the plugin table.
func Build(cfg *Config, table []Builtin, deps Deps, dryRun bool, metrics *Metrics) (*Pipeline, error) {
	var stages []Stage
	var errs []error
	for _, b := range table {
		pc := cfg.Plugins[b.Name]
		if !pc.Enabled {
			continue
		}
		d := deps
		d.Log = deps.Log.With("plugin", b.Name)
		p, err := b.New(d, pc.Settings)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugins.%w", err))
			continue
		}
		stages = append(stages, Stage{Plugin: p, Spec: pc.Spec})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return NewPipeline(stages, dryRun || cfg.DryRun, metrics, deps.Log), nil
}

// DryRun reports whether the pipeline only reports.
func (p *Pipeline) DryRun() bool { return p.dryRun }

// Names lists the enabled plugins.
func (p *Pipeline) Names() []string {
	out := make([]string, 0, len(p.stages))
	for _, s := range p.stages {
		out = append(out, s.Plugin.Name())
	}
	return out
}

// After lists, for each enabled plugin, the enabled plugins it runs after.
func (p *Pipeline) After() map[string][]string {
	enabled := map[string]bool{}
	for _, s := range p.stages {
		enabled[s.Plugin.Name()] = true
	}
	out := make(map[string][]string, len(p.stages))
	for _, s := range p.stages {
		deps := []string{}
		for _, d := range s.After {
			if enabled[d] {
				deps = append(deps, d)
			}
		}
		out[s.Plugin.Name()] = deps
	}
	return out
}

// Run runs every stage once for node: a stage starts when every stage it
// runs after has finished, so unrelated stages run in parallel. A stage whose
// critical predecessor failed is skipped. Run returns when every stage has
// finished or ctx ends (stages that ignore ctx are abandoned, not waited for).
func (p *Pipeline) Run(ctx context.Context, node *corev1.Node, attempt int) Result {
	return p.RunObserved(ctx, node, attempt, nil, nil)
}

// RunObserved is Run that also tells observe about each stage as it ends,
// from the goroutine that called it. The plugins in unhealthy (their health
// probe failed) are not called: each ends as ResultUnhealthy with its error
// at once, instead of spending its timeout and retries on a system that does
// not answer.
func (p *Pipeline) RunObserved(ctx context.Context, node *corev1.Node, attempt int, unhealthy map[string]error, observe func(PluginResult)) Result {
	ctx = WithRunInfo(ctx, RunInfo{DryRun: p.dryRun, Attempt: attempt})
	type done struct {
		idx int
		res PluginResult
	}
	index := map[string]int{}
	for i, s := range p.stages {
		index[s.Plugin.Name()] = i
	}
	finished := make([]chan struct{}, len(p.stages))
	results := make([]PluginResult, len(p.stages))
	for i := range finished {
		finished[i] = make(chan struct{})
	}
	out := make(chan done, len(p.stages))
	for i, s := range p.stages {
		go func() {
			blocked := ""
			for _, dep := range s.After {
				j, ok := index[dep]
				if !ok {
					continue // disabled
				}
				select {
				case <-finished[j]:
				case <-ctx.Done():
					return
				}
				if r := results[j]; (r.Critical && r.Failed()) || (r.Result == ResultSkipped && r.Err != nil && !r.leftAlone()) {
					blocked = dep
				}
			}
			var res PluginResult
			if err, bad := unhealthy[s.Plugin.Name()]; bad && blocked == "" {
				res = PluginResult{Name: s.Plugin.Name(), Critical: s.Critical, Result: ResultUnhealthy, Err: err}
				p.metrics.observe(res.Name, res.Result, 0)
			} else if blocked != "" {
				res = PluginResult{Name: s.Plugin.Name(), Critical: s.Critical, Result: ResultSkipped,
					Err: fmt.Errorf("not run: %s, which it runs after, failed", blocked)}
				if ctx.Err() == nil {
					p.metrics.observe(res.Name, res.Result, 0)
				}
			} else {
				res = p.runStage(ctx, s, node)
			}
			results[i] = res
			close(finished[i])
			out <- done{i, res}
		}()
	}
	var r Result
	var errs []error
	for range p.stages {
		select {
		case d := <-out:
			r.Plugins = append(r.Plugins, d.res)
			if observe != nil {
				observe(d.res)
			}
			if d.res.Critical && d.res.Err != nil && !d.res.leftAlone() {
				errs = append(errs, fmt.Errorf("%s: %w", d.res.Name, d.res.Err))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("cleanup interrupted: %w", context.Cause(ctx)))
			r.Err = errors.Join(errs...)
			return r
		}
	}
	r.Err = errors.Join(errs...)
	return r
}

// runStage runs one plugin with its timeout, turning panics, hangs and
// unprintable errors into that plugin's failure.
func (p *Pipeline) runStage(ctx context.Context, s Stage, node *corev1.Node) PluginResult {
	name := s.Plugin.Name()
	res := PluginResult{Name: name, Critical: s.Critical}
	should, err := guard(func() (bool, error) { return s.Plugin.ShouldRun(node.DeepCopy()), nil })
	if err != nil {
		res.Result, res.Err = ResultPanic, fmt.Errorf("ShouldRun: %w", err)
		p.metrics.observe(name, res.Result, 0)
		return res
	}
	if !should {
		res.Result = ResultSkipped
		p.metrics.observe(name, res.Result, 0)
		return res
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		_, err := guard(func() (bool, error) { return false, s.Plugin.Cleanup(sctx, node.DeepCopy()) })
		errc <- err
	}()
	select {
	case err = <-errc:
	case <-sctx.Done():
		err = context.Cause(sctx)
	}
	res.Duration = time.Since(start)
	var pe *panicError
	switch {
	case errors.As(err, &pe):
		res.Result, res.Err = ResultPanic, err
	case sctx.Err() != nil && ctx.Err() == nil:
		// Past its timeout whatever it returned: the cleanup may be half done.
		res.Result, res.Err = ResultTimeout, fmt.Errorf("timed out after %s", timeout)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			res.Err = fmt.Errorf("timed out after %s: %s", timeout, describe(err))
		}
	case errors.As(err, new(*Skip)):
		res.Result, res.Err = ResultSkipped, err
	case err != nil:
		res.Result, res.Err = ResultFailure, errors.New(describe(err))
	case p.dryRun:
		res.Result = ResultDryRun
	default:
		res.Result = ResultSuccess
	}
	if ctx.Err() == nil {
		p.metrics.observe(name, res.Result, res.Duration)
	}
	return res
}

// Finished tells every Observer stage how the attempt ended.
func (p *Pipeline) Finished(ctx context.Context, node *corev1.Node, attempt int, err error) {
	ctx = WithRunInfo(ctx, RunInfo{DryRun: p.dryRun, Attempt: attempt})
	for _, s := range p.stages {
		if o, ok := s.Plugin.(Observer); ok {
			timeout := s.Timeout
			if timeout <= 0 {
				timeout = time.Minute
			}
			octx, cancel := context.WithTimeout(ctx, timeout)
			_, perr := guard(func() (bool, error) { o.Finished(octx, node.DeepCopy(), err); return false, nil })
			cancel()
			if perr != nil {
				p.log.Warn("plugin panicked reporting the outcome", "plugin", s.Plugin.Name(), "node", node.Name, "error", perr)
			}
		}
	}
}

type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// guard calls f, turning a panic into a *panicError.
func guard(f func() (bool, error)) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return f()
}

// describe renders err without trusting it: a typed nil or an Error method
// that panics becomes a description instead of a crash, and a long one is
// cut to what an Event note can carry, where it ends up.
func describe(err error) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("plugin returned an unprintable error (%T)", err)
		}
	}()
	s = err.Error()
	if s == "" {
		s = fmt.Sprintf("plugin returned an empty error (%T)", err)
	}
	return eventnote.Shorten(s)
}
