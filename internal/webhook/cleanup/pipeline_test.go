package cleanup

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fake is a plugin whose behaviour a test scripts.
type fake struct {
	name   string
	skip   bool
	run    func(ctx context.Context) error
	rec    *recorder
	gate   chan struct{} // when set, Cleanup waits for it (parallelism tests)
	dryRan bool
}

type recorder struct {
	mu      sync.Mutex
	started []string
	ended   []string
	active  int
	maxPar  int
}

func (r *recorder) start(n string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, n)
	r.active++
	r.maxPar = max(r.maxPar, r.active)
}

func (r *recorder) end(n string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = append(r.ended, n)
	r.active--
}

func (f *fake) Name() string                { return f.name }
func (f *fake) ShouldRun(*corev1.Node) bool { return !f.skip }
func (f *fake) Cleanup(ctx context.Context, _ *corev1.Node) error {
	if f.rec != nil {
		f.rec.start(f.name)
		defer f.rec.end(f.name)
	}
	f.dryRan = DryRun(ctx)
	if f.gate != nil {
		<-f.gate
	}
	if f.run != nil {
		return f.run(ctx)
	}
	return nil
}

type typedNilErr struct{ msg *string }

func (e *typedNilErr) Error() string { return *e.msg }

var testNode = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}

func stage(p Plugin, critical bool, after ...string) Stage {
	return Stage{Plugin: p, Spec: Spec{Enabled: true, Critical: critical, Timeout: time.Second, After: after}}
}

func results(r Result) map[string]string {
	out := map[string]string{}
	for _, p := range r.Plugins {
		out[p.Name] = p.Result
	}
	return out
}

func TestPipelineOutcomes(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		stages  []Stage
		want    map[string]string
		wantErr string // substring; "" means the finalizer may go
	}{
		{"all succeed", []Stage{stage(&fake{name: "a"}, true), stage(&fake{name: "b"}, false)},
			map[string]string{"a": ResultSuccess, "b": ResultSuccess}, ""},
		{"optional failure does not block", []Stage{stage(&fake{name: "a", run: func(context.Context) error { return boom }}, false), stage(&fake{name: "b"}, true, "a")},
			map[string]string{"a": ResultFailure, "b": ResultSuccess}, ""},
		{"critical failure blocks and skips dependents", []Stage{stage(&fake{name: "a", run: func(context.Context) error { return boom }}, true), stage(&fake{name: "b"}, false, "a"), stage(&fake{name: "c"}, false, "b"), stage(&fake{name: "d"}, false)},
			map[string]string{"a": ResultFailure, "b": ResultSkipped, "c": ResultSkipped, "d": ResultSuccess}, "a: boom"},
		{"ShouldRun false is skipped, dependents run", []Stage{stage(&fake{name: "a", skip: true}, true), stage(&fake{name: "b"}, true, "a")},
			map[string]string{"a": ResultSkipped, "b": ResultSuccess}, ""},
		{"panic is the plugin's failure", []Stage{stage(&fake{name: "a", run: func(context.Context) error { panic("oops") }}, true)},
			map[string]string{"a": ResultPanic}, "panic: oops"},
		{"hang past timeout", []Stage{{Plugin: &fake{name: "a", run: func(context.Context) error { select {} }}, Spec: Spec{Critical: true, Timeout: 50 * time.Millisecond}}},
			map[string]string{"a": ResultTimeout}, "timed out after 50ms"},
		{"unprintable error", []Stage{stage(&fake{name: "a", run: func(context.Context) error { return &typedNilErr{} }}, true)},
			map[string]string{"a": ResultFailure}, "unprintable error"},
		{"empty error", []Stage{stage(&fake{name: "a", run: func(context.Context) error { return errors.New("") }}, true)},
			map[string]string{"a": ResultFailure}, "empty error"},
		{"disabled dependency is ignored", []Stage{stage(&fake{name: "b"}, true, "not-enabled")},
			map[string]string{"b": ResultSuccess}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := NewMetrics(nil)
			p := NewPipeline(tt.stages, false, m, slog.New(slog.DiscardHandler))
			r := p.Run(context.Background(), testNode, 1)
			if got := results(r); !mapsEqual(got, tt.want) {
				t.Errorf("results = %v, want %v", got, tt.want)
			}
			switch {
			case tt.wantErr == "" && r.Err != nil:
				t.Errorf("err = %v, want none", r.Err)
			case tt.wantErr != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want one containing %q", r.Err, tt.wantErr)
			}
		})
	}
}

func TestPipelineOrderAndParallelism(t *testing.T) {
	rec := &recorder{}
	gate := make(chan struct{})
	// a and b are unrelated: both must be running at once (b waits on the
	// gate that only opens once a has started). c runs after both, d after c.
	a := &fake{name: "a", rec: rec, run: func(context.Context) error { close(gate); return nil }}
	b := &fake{name: "b", rec: rec, gate: gate}
	c := &fake{name: "c", rec: rec}
	d := &fake{name: "d", rec: rec}
	p := NewPipeline([]Stage{stage(d, true, "c"), stage(c, true, "a", "b"), stage(b, true), stage(a, true)}, false, nil, slog.New(slog.DiscardHandler))
	r := p.Run(context.Background(), testNode, 1)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	pos := func(list []string, s string) int { return slices.Index(list, s) }
	if pos(rec.started, "c") < pos(rec.ended, "a") || pos(rec.started, "c") < pos(rec.ended, "b") {
		t.Errorf("c started before a and b ended: started %v ended %v", rec.started, rec.ended)
	}
	if pos(rec.started, "d") < pos(rec.ended, "c") {
		t.Errorf("d started before c ended: started %v ended %v", rec.started, rec.ended)
	}
	if !slices.Equal(rec.started[2:], []string{"c", "d"}) {
		t.Errorf("start order %v, want a and b (any order) then c, d", rec.started)
	}
}

func TestPipelineDryRunReachesPlugins(t *testing.T) {
	f := &fake{name: "a"}
	p := NewPipeline([]Stage{stage(f, true)}, true, nil, slog.New(slog.DiscardHandler))
	r := p.Run(context.Background(), testNode, 1)
	if r.Err != nil || !f.dryRan || results(r)["a"] != ResultDryRun {
		t.Errorf("dry run: err=%v plugin saw dry-run=%v results=%v", r.Err, f.dryRan, results(r))
	}
}

func TestPipelineCancelAbandonsHungPlugins(t *testing.T) {
	p := NewPipeline([]Stage{{Plugin: &fake{name: "a", run: func(context.Context) error { select {} }}, Spec: Spec{Critical: true, Timeout: time.Hour}}}, false, nil, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel(errors.New("bypassed")) }()
	r := p.Run(ctx, testNode, 1)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "bypassed") {
		t.Errorf("err = %v, want the cancellation cause", r.Err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
