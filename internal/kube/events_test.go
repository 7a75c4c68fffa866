package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

// fakeSink is an in-memory API server for Events.
type fakeSink struct {
	mu     sync.Mutex
	events map[string]*eventsv1.Event // by namespace/name
	calls  []call
	// fail answers the next n writes with an error.
	fail int
	// block holds every write until its context ends.
	block bool
}

// call is one write as the tests compare it.
type call struct {
	Verb  string // create, patch or patch-notfound
	Node  string
	UID   types.UID
	Count int32 // occurrences the Event stands for after the write
}

func (f *fakeSink) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return errors.New("injected failure")
	}
	key := ev.Namespace + "/" + ev.Name
	if f.events == nil {
		f.events = make(map[string]*eventsv1.Event)
	}
	if _, ok := f.events[key]; ok {
		return apierrors.NewAlreadyExists(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, ev.Name)
	}
	f.events[key] = ev.DeepCopy()
	f.calls = append(f.calls, call{"create", ev.Regarding.Name, ev.Regarding.UID, seriesCount(ev)})
	return nil
}

func (f *fakeSink) PatchEvent(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) error {
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return errors.New("injected failure")
	}
	if pt != types.MergePatchType {
		return fmt.Errorf("unexpected patch type %s", pt)
	}
	ev, ok := f.events[namespace+"/"+name]
	if !ok {
		f.calls = append(f.calls, call{Verb: "patch-notfound"})
		return apierrors.NewNotFound(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, name)
	}
	var p struct {
		Series *eventsv1.EventSeries `json:"series"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if p.Series == nil || p.Series.Count < 2 || p.Series.LastObservedTime.IsZero() {
		return fmt.Errorf("invalid series patch %s", data)
	}
	ev.Series = p.Series
	f.calls = append(f.calls, call{"patch", ev.Regarding.Name, ev.Regarding.UID, seriesCount(ev)})
	return nil
}

func (f *fakeSink) written() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fakeSink) deleteAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.events)
}

func seriesCount(ev *eventsv1.Event) int32 {
	if ev.Series == nil {
		return 1
	}
	return ev.Series.Count
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a Recorder on a fake clock and sink, stepped by hand instead of by
// its worker, so every test decides exactly when time passes.
type env struct {
	r     *Recorder
	clock *fakeClock
	sink  *fakeSink
}

func newEnv(interval, idle time.Duration) *env {
	e := &env{clock: &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}, sink: &fakeSink{}}
	e.r = &Recorder{Controller: "kube-node-ready-agent", Instance: "node-a", SeriesInterval: interval, SeriesIdle: idle}
	e.r.sink = e.sink
	e.r.now = e.clock.Now
	return e
}

var (
	nodeA  = corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "uid-1"}
	nodeA2 = corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "uid-2"}
)

// record records an Event on ref with note and lets the worker's step run.
func (e *env) record(ref corev1.ObjectReference, note string) {
	e.r.Eventf(ref, corev1.EventTypeWarning, "VerificationFailed", "Verify", "%s", note)
	e.step()
}

// advance moves the clock and lets the worker's timer step run.
func (e *env) advance(d time.Duration) {
	e.clock.Advance(d)
	e.step()
}

func (e *env) step() {
	e.r.drainQueue(context.Background())
	e.r.flush(context.Background(), false)
}

func TestRecorderSeries(t *testing.T) {
	const interval, idle = 5 * time.Minute, 6 * time.Minute
	tests := []struct {
		name string
		run  func(e *env)
		want []call
	}{
		{
			name: "first occurrence creates",
			run:  func(e *env) { e.record(nodeA, "dns failed") },
			want: []call{{"create", "node-a", "uid-1", 1}},
		},
		{
			name: "first repeat patches at once with count 2",
			run: func(e *env) {
				e.record(nodeA, "dns failed")
				e.advance(time.Second)
				e.record(nodeA, "dns failed")
			},
			want: []call{{"create", "node-a", "uid-1", 1}, {"patch", "node-a", "uid-1", 2}},
		},
		{
			name: "later repeats wait for the interval and are written together",
			run: func(e *env) {
				e.record(nodeA, "dns failed")
				e.record(nodeA, "dns failed")
				for range 10 {
					e.advance(20 * time.Second)
					e.record(nodeA, "dns failed")
				}
				// 200 s after the first patch: nothing more was written.
				e.advance(interval - 200*time.Second - time.Second)
				e.advance(time.Second)
			},
			want: []call{{"create", "node-a", "uid-1", 1}, {"patch", "node-a", "uid-1", 2}, {"patch", "node-a", "uid-1", 12}},
		},
		{
			name: "at most one series write per interval",
			run: func(e *env) {
				e.record(nodeA, "dns failed")
				for range 60 {
					e.record(nodeA, "dns failed")
					e.advance(30 * time.Second)
				}
			},
			// 30 minutes of repeats: the prompt first repeat, then one
			// write every 5 minutes.
			want: []call{
				{"create", "node-a", "uid-1", 1}, {"patch", "node-a", "uid-1", 2},
				{"patch", "node-a", "uid-1", 11}, {"patch", "node-a", "uid-1", 21}, {"patch", "node-a", "uid-1", 31},
				{"patch", "node-a", "uid-1", 41}, {"patch", "node-a", "uid-1", 51}, {"patch", "node-a", "uid-1", 61},
			},
		},
		{
			name: "same name different uid is a new event",
			run: func(e *env) {
				e.record(nodeA, "dns failed")
				e.record(nodeA2, "dns failed")
			},
			want: []call{{"create", "node-a", "uid-1", 1}, {"create", "node-a", "uid-2", 1}},
		},
		{
			name: "different note is a new event",
			run: func(e *env) {
				e.record(nodeA, "dns failed")
				e.record(nodeA, "api failed")
			},
			want: []call{{"create", "node-a", "uid-1", 1}, {"create", "node-a", "uid-1", 1}},
		},
		{
			name: "idle series is finished and the next occurrence creates",
			run: func(e *env) {
				e.record(nodeA, "dns failed")
				e.record(nodeA, "dns failed")
				e.advance(idle)
				e.record(nodeA, "dns failed")
			},
			want: []call{{"create", "node-a", "uid-1", 1}, {"patch", "node-a", "uid-1", 2}, {"create", "node-a", "uid-1", 1}},
		},
		{
			name: "pending repeats are written before their series finishes",
			run: func(e *env) {
				e.record(nodeA, "dns failed")
				e.record(nodeA, "dns failed")
				e.record(nodeA, "dns failed")
				e.clock.Advance(2 * idle) // the worker's timer did not fire meanwhile
				e.record(nodeA, "dns failed")
			},
			want: []call{
				{"create", "node-a", "uid-1", 1}, {"patch", "node-a", "uid-1", 2},
				{"patch", "node-a", "uid-1", 3}, {"create", "node-a", "uid-1", 1},
			},
		},
		{
			name: "not found on patch creates a new event",
			run: func(e *env) {
				e.record(nodeA, "dns failed")
				e.sink.deleteAll()
				e.record(nodeA, "dns failed")
				// The replacement was this interval's series write.
				e.record(nodeA, "dns failed")
				e.advance(interval)
			},
			want: []call{
				{"create", "node-a", "uid-1", 1}, {Verb: "patch-notfound"}, {"create", "node-a", "uid-1", 1},
				{"patch", "node-a", "uid-1", 2},
			},
		},
		{
			name: "failed create is retried after the interval, not per occurrence",
			run: func(e *env) {
				e.sink.fail = 1
				e.record(nodeA, "dns failed")
				e.record(nodeA, "dns failed")
				e.advance(interval)
				e.record(nodeA, "dns failed")
				e.advance(interval - time.Second)
				e.advance(time.Second)
			},
			// The retry carries the series; the next write waits its turn.
			want: []call{{"create", "node-a", "uid-1", 2}, {"patch", "node-a", "uid-1", 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(interval, idle)
			tt.run(e)
			if got := e.sink.written(); !equalCalls(got, tt.want) {
				t.Errorf("writes:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func equalCalls(a, b []call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRecorderEventFields(t *testing.T) {
	e := newEnv(0, 0)
	start := e.clock.Now()
	long := strings.Repeat("x", eventnote.MaxBytes-4) + "é and more"
	tests := []struct {
		name     string
		ref      corev1.ObjectReference
		note     string
		wantNS   string
		wantNote string
	}{
		{name: "cluster-scoped object in default", ref: nodeA, note: "dns failed", wantNS: "default", wantNote: "dns failed"},
		{
			name: "namespaced object in its namespace",
			ref:  corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "kube-system", Name: "agent-x", UID: "uid-p"},
			note: "dns failed", wantNS: "kube-system", wantNote: "dns failed",
		},
		{
			name: "long note cut on a rune boundary", ref: nodeA2, note: long, wantNS: "default",
			wantNote: strings.Repeat("x", eventnote.MaxBytes-4) + "...",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.r.Eventf(tt.ref, corev1.EventTypeWarning, "VerificationFailed", "Verify", "%s", tt.note)
			e.step()
			var ev *eventsv1.Event
			for _, got := range e.sink.events {
				if got.Regarding == tt.ref {
					ev = got
				}
			}
			if ev == nil {
				t.Fatalf("no Event regarding %v", tt.ref)
			}
			if ev.Namespace != tt.wantNS {
				t.Errorf("namespace %q, want %q", ev.Namespace, tt.wantNS)
			}
			if !strings.HasPrefix(ev.Name, tt.ref.Name+".") {
				t.Errorf("name %q, want prefix %q", ev.Name, tt.ref.Name+".")
			}
			if ev.Note != tt.wantNote || len(ev.Note) > eventnote.MaxBytes || !utf8.ValidString(ev.Note) {
				t.Errorf("note %q (%d bytes), want %q", ev.Note, len(ev.Note), tt.wantNote)
			}
			if ev.ReportingController != "kube-node-ready-agent" || ev.ReportingInstance != "node-a" ||
				ev.Reason != "VerificationFailed" || ev.Action != "Verify" || ev.Type != corev1.EventTypeWarning {
				t.Errorf("event %+v", ev)
			}
			if !ev.EventTime.Time.Equal(start) || ev.Series != nil {
				t.Errorf("eventTime %v series %v, want %v and none", ev.EventTime, ev.Series, start)
			}
		})
	}
}

func TestRecorderSeriesFields(t *testing.T) {
	e := newEnv(time.Minute, 0)
	e.record(nodeA, "dns failed")
	e.advance(time.Second)
	e.record(nodeA, "dns failed")
	e.advance(2 * time.Second)
	e.record(nodeA, "dns failed")
	last := e.clock.Now()
	e.advance(time.Minute)
	if len(e.sink.events) != 1 {
		t.Fatalf("%d Events, want 1", len(e.sink.events))
	}
	for _, ev := range e.sink.events {
		want := &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(last)}
		if ev.Series == nil || ev.Series.Count != want.Count || !ev.Series.LastObservedTime.Equal(&want.LastObservedTime) {
			t.Errorf("series %+v, want %+v", ev.Series, want)
		}
	}
}

func TestRecorderQueueFullDrops(t *testing.T) {
	e := newEnv(0, 0)
	e.r.QueueSize = 3
	var logs bytes.Buffer
	e.r.Log = slog.New(slog.NewTextHandler(&logs, nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			e.r.Eventf(nodeA, corev1.EventTypeNormal, "Verified", "Untaint", "event %d", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Eventf blocked on a full queue")
	}
	if got := e.r.Dropped(); got != 7 {
		t.Errorf("Dropped() = %d, want 7", got)
	}
	if n := strings.Count(logs.String(), "event queue full"); n != 1 {
		t.Errorf("%d overflow log lines for one burst, want 1:\n%s", n, logs.String())
	}
	e.step()
	if got := len(e.sink.written()); got != 3 {
		t.Errorf("%d Events written, want the 3 queued", got)
	}
}

func TestRecorderClose(t *testing.T) {
	tests := []struct {
		name string
		run  bool // start the worker before recording
	}{
		{name: "without worker"},
		{name: "with worker", run: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(0, 0)
			var stopped chan struct{}
			if tt.run {
				stopped = make(chan struct{})
				go func() { defer close(stopped); e.r.Run(context.Background()) }()
			}
			for range 5 {
				e.r.Eventf(nodeA, corev1.EventTypeWarning, "VerificationFailed", "Verify", "dns failed")
			}
			e.r.Eventf(nodeA2, corev1.EventTypeWarning, "VerificationFailed", "Verify", "dns failed")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.r.Close(ctx)
			if tt.run {
				<-stopped
			}
			// The first repeat goes out at once and the default interval
			// holds back the rest: only Close writes count 5.
			want := []call{{"create", "node-a", "uid-1", 1}, {"patch", "node-a", "uid-1", 2}, {"patch", "node-a", "uid-1", 5}}
			var got []call
			for _, c := range e.sink.written() {
				if c.UID == "uid-1" {
					got = append(got, c)
				}
			}
			if !equalCalls(got, want) {
				t.Errorf("writes:\n got %v\nwant %v", got, want)
			}
			if n := len(e.sink.written()) - len(got); n != 1 {
				t.Errorf("%d writes for uid-2, want 1", n)
			}
			e.r.Eventf(nodeA, corev1.EventTypeWarning, "VerificationFailed", "Verify", "dns failed")
			if e.r.Dropped() != 1 {
				t.Errorf("Dropped() = %d after Eventf on a closed Recorder, want 1", e.r.Dropped())
			}
		})
	}
}

func TestRecorderCloseBoundedByContext(t *testing.T) {
	e := newEnv(0, 0)
	e.sink.block = true
	stopped := make(chan struct{})
	go func() { defer close(stopped); e.r.Run(context.Background()) }()
	e.r.Eventf(nodeA, corev1.EventTypeWarning, "VerificationFailed", "Verify", "dns failed")
	e.r.Eventf(nodeA2, corev1.EventTypeWarning, "VerificationFailed", "Verify", "dns failed")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	e.r.Close(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %s with a 100ms deadline", d)
	}
	// Close aborted the worker's write rather than leave it running.
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Error("worker did not stop after Close gave up")
	}
}

func TestRecorderRunWritesSeriesOnTimer(t *testing.T) {
	// Real clock: the worker's own timer writes the accumulated count.
	sink := &fakeSink{}
	r := &Recorder{Controller: "c", Instance: "i", SeriesInterval: 50 * time.Millisecond, sink: sink}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); r.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	for range 10 {
		r.Eventf(nodeA, corev1.EventTypeWarning, "VerificationFailed", "Verify", "dns failed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if w := sink.written(); len(w) > 0 && w[len(w)-1].Count == 10 {
			if len(w) > 3 {
				t.Errorf("%d writes for 10 occurrences in one interval: %v", len(w), w)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("count 10 not written; writes %v", sink.written())
}
