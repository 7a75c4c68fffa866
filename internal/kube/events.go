package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

const (
	// writeTimeout bounds each API write, so one slow request cannot hold
	// up the queue behind it for long.
	writeTimeout = 10 * time.Second

	defaultSeriesInterval = 5 * time.Minute
	// defaultSeriesIdle is when client-go's events broadcaster finishes a series.
	defaultSeriesIdle = 6 * time.Minute
	defaultQueueSize  = 100
)

// Recorder writes events.k8s.io/v1 Events about Nodes and counts repeats into
// Event series, as client-go's events broadcaster does, without linking it:
// the broadcaster needs the generated clientset (see the package comment).
//
// An Event is identified by the object it regards (its UID as well as its
// name, so a Node re-created under the same name gets Events of its own),
// type, reason, action and note; callers keep notes stable for repeats to be
// counted. The first occurrence creates an Event. Repeats are written to that
// Event's series (count and last observed time) with a PATCH: the first
// repeat at once, later ones accumulated and written at most once per
// SeriesInterval. A series not observed for SeriesIdle is finished, and the
// next occurrence creates a new Event. So while it keeps occurring, each
// distinct (object, reason, note) costs the API server at most one create
// plus one series write per SeriesInterval, however often it occurs, and
// also while writes fail: a failed write is retried after SeriesInterval.
//
// Eventf never blocks: occurrences go through a queue of QueueSize and are
// dropped, and counted in Dropped, when it is full. One worker, started by
// Run, writes them; Close drains the queue and flushes pending counts.
// Set the fields before the first call of any method.
type Recorder struct {
	// Client writes the Events; it is required.
	Client *Client
	// Controller is the reportingController, such as kube-node-ready-agent.
	Controller string
	// Instance is the reportingInstance, such as the node name.
	Instance string
	// SeriesInterval is the least time between two writes of one series
	// after its first repeat; 5 minutes when zero.
	SeriesInterval time.Duration
	// SeriesIdle is how long a series goes unobserved before it is finished;
	// 6 minutes when zero, and never less than SeriesInterval, so pending
	// repeats are written before their series is forgotten.
	SeriesIdle time.Duration
	// QueueSize is how many occurrences may wait for the worker; 100 when zero.
	QueueSize int
	// Log receives write failures and queue overflows; nil discards them.
	Log *slog.Logger

	// sink writes the Events: Client, or a fake in unit tests.
	sink eventSink
	// now is the clock, injectable so unit tests control series timing.
	now func() time.Time

	initOnce         sync.Once
	interval, idle   time.Duration
	log              *slog.Logger
	queue            chan observation
	stop, stopped    chan struct{}
	dropped          atomic.Uint64
	dropping, closed atomic.Bool

	// mu orders Run's start against Close, so the series are only ever
	// touched by the worker or, once it is gone, by Close.
	mu        sync.Mutex
	started   bool
	cancelRun context.CancelFunc

	// drainMu keeps two calls of Close from draining at once.
	drainMu sync.Mutex
	// series and lastStamp belong to the worker (then to Close).
	series    map[eventKey]*series
	lastStamp int64
}

// eventSink is the write side of the API server that Recorder needs.
type eventSink interface {
	CreateEvent(ctx context.Context, ev *eventsv1.Event) error
	PatchEvent(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) error
}

// PatchEvent patches an events.k8s.io/v1 Event.
func (c *Client) PatchEvent(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) error {
	return c.events.Patch(pt).Namespace(namespace).Resource("events").Name(name).Body(data).Do(ctx).Error()
}

// eventKey identifies one series: occurrences with equal keys are counted
// into the same Event.
type eventKey struct {
	kind, namespace, name string
	uid                   types.UID
	eventType, reason     string
	action, note          string
}

// observation is one call of Eventf.
type observation struct {
	key eventKey
	ref corev1.ObjectReference
	at  time.Time
}

// series is what the worker knows about one Event and its repeats.
type series struct {
	obs observation
	// name is the Event's name; empty until it is created.
	name string
	// count is how many occurrences the Event stands for; written is how
	// many of them the API server has.
	count, written int32
	// pendingSince is the first occurrence not yet written.
	pendingSince time.Time
	// last is the latest occurrence.
	last time.Time
	// lastWrite is the latest write attempt, from which SeriesInterval runs.
	lastWrite time.Time
	// prompt lets the next write go out at once: the first occurrence and
	// the first repeat are not held back.
	prompt bool
}

func (s *series) pending() bool { return s.count > s.written }

func (r *Recorder) init() {
	r.initOnce.Do(func() {
		r.interval = r.SeriesInterval
		if r.interval <= 0 {
			r.interval = defaultSeriesInterval
		}
		r.idle = r.SeriesIdle
		if r.idle <= 0 {
			r.idle = defaultSeriesIdle
		}
		r.idle = max(r.idle, r.interval)
		size := r.QueueSize
		if size <= 0 {
			size = defaultQueueSize
		}
		r.log = r.Log
		if r.log == nil {
			r.log = slog.New(slog.DiscardHandler)
		}
		if r.sink == nil {
			r.sink = r.Client
		}
		if r.now == nil {
			r.now = time.Now
		}
		r.queue = make(chan observation, size)
		r.stop = make(chan struct{})
		r.stopped = make(chan struct{})
		r.series = make(map[eventKey]*series)
	})
}

// Eventf records an Event regarding ref (a cluster-scoped object's Events
// live in the default namespace, as client-go's recorder puts them). It never
// blocks: when the queue is full, or after Close, the Event is dropped.
func (r *Recorder) Eventf(ref corev1.ObjectReference, eventType, reason, action, format string, args ...any) {
	r.init()
	if r.closed.Load() {
		r.dropped.Add(1)
		return
	}
	note := eventnote.Shorten(fmt.Sprintf(format, args...))
	o := observation{
		key: eventKey{
			kind: ref.Kind, namespace: ref.Namespace, name: ref.Name, uid: ref.UID,
			eventType: eventType, reason: reason, action: action, note: note,
		},
		ref: ref,
		at:  r.now(),
	}
	select {
	case r.queue <- o:
	default:
		n := r.dropped.Add(1)
		// One line per overflow, not per Event: the worker re-arms this
		// once it has emptied the queue.
		if r.dropping.CompareAndSwap(false, true) {
			r.log.Warn("event queue full, dropping events", "queue_size", cap(r.queue), "dropped_total", n)
		}
	}
}

// Dropped says how many Events were discarded because the queue was full
// or the Recorder was closed.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// Run writes queued Events until ctx ends or Close is called; call it once,
// in its own goroutine. What is still queued or pending when it returns is
// written by Close.
func (r *Recorder) Run(ctx context.Context) {
	r.init()
	r.mu.Lock()
	if r.started || r.closed.Load() {
		r.mu.Unlock()
		return
	}
	r.started = true
	ctx, r.cancelRun = context.WithCancel(ctx)
	r.mu.Unlock()
	defer close(r.stopped)
	defer r.cancelRun()

	timer := time.NewTimer(0)
	timer.Stop()
	defer timer.Stop()
	for {
		// Close wins over a busy queue: it takes over what is left.
		select {
		case <-r.stop:
			return
		default:
		}
		var wake <-chan time.Time
		if next := r.flush(ctx, false); !next.IsZero() {
			timer.Reset(max(next.Sub(r.now()), 0))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-r.stop:
			return
		case o := <-r.queue:
			r.observe(ctx, o)
			if len(r.queue) == 0 {
				r.dropping.Store(false)
			}
		case <-wake:
		}
	}
}

// Close stops the worker, then writes what is queued and flushes the counts
// of all series, whatever their SeriesInterval, within ctx's deadline. Events
// recorded after Close are dropped. If ctx ends before the worker has
// finished its current write, Close aborts that write and returns without
// draining.
func (r *Recorder) Close(ctx context.Context) {
	r.init()
	r.mu.Lock()
	if !r.closed.Swap(true) {
		close(r.stop)
	}
	started := r.started
	r.mu.Unlock()
	if started {
		select {
		case <-r.stopped:
		case <-ctx.Done():
			// Abort the write in flight; the process is leaving anyway.
			r.cancelRun()
			r.log.Warn("events not flushed: worker still writing at shutdown")
			return
		}
	}

	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	r.drainQueue(ctx)
	r.flush(ctx, true)
	var lost int32
	for _, s := range r.series {
		lost += s.count - s.written
	}
	if lost > 0 {
		r.log.Warn("events not written before shutdown", "occurrences", lost)
	}
	clear(r.series)
}

// drainQueue takes what is queued now, without waiting for more.
func (r *Recorder) drainQueue(ctx context.Context) {
	for {
		select {
		case o := <-r.queue:
			r.observe(ctx, o)
		default:
			return
		}
	}
}

// observe counts one occurrence into its series, writing at once if that is
// the series' first occurrence or first repeat.
func (r *Recorder) observe(ctx context.Context, o observation) {
	s := r.series[o.key]
	if s != nil && o.at.Sub(s.last) >= r.idle {
		// A finished series the timer has not swept yet.
		if s.pending() {
			r.write(ctx, s)
		}
		s = nil
	}
	if s == nil {
		s = &series{obs: o, prompt: true}
		r.series[o.key] = s
	}
	if !s.pending() {
		s.pendingSince = o.at
	}
	s.count++
	s.last = o.at
	if s.prompt {
		r.write(ctx, s)
	}
}

// flush writes the series that are due (all pending ones if force), forgets
// finished ones, and says when the next one falls due; zero if none will.
func (r *Recorder) flush(ctx context.Context, force bool) time.Time {
	now := r.now()
	var next time.Time
	earliest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for key, s := range r.series {
		due := s.prompt || !now.Before(s.lastWrite.Add(r.interval))
		finished := !now.Before(s.last.Add(r.idle))
		if s.pending() && (due || finished || force) {
			r.write(ctx, s)
		}
		if finished {
			delete(r.series, key)
			continue
		}
		if s.pending() {
			earliest(s.lastWrite.Add(r.interval))
		}
		earliest(s.last.Add(r.idle))
	}
	return next
}

// write brings the API server up to date with s: it creates the Event or
// patches its series. A failure leaves the occurrences pending, to be
// retried no sooner than SeriesInterval.
func (r *Recorder) write(ctx context.Context, s *series) {
	now := r.now()
	first := s.lastWrite.IsZero()
	s.lastWrite = now
	s.prompt = false
	if s.name != "" {
		err := r.patchSeries(ctx, s)
		if err == nil {
			s.written = s.count
			return
		}
		if !apierrors.IsNotFound(err) {
			r.failed(ctx, "update event series", s, err)
			return
		}
		// The Event was deleted, and what it recorded with it: start a new
		// Event for the occurrences it had not recorded yet.
		s.count -= s.written
		s.written = 0
		s.name = ""
	}
	ev := r.newEvent(s, now)
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := r.sink.CreateEvent(wctx, ev); err != nil {
		r.failed(ctx, "create event", s, err)
		return
	}
	s.name = ev.Name
	s.written = s.count
	// Only the series' first write lets the first repeat out at once: a
	// retried or replacement create is already one write in this interval.
	s.prompt = first && s.count == 1
}

func (r *Recorder) patchSeries(ctx context.Context, s *series) error {
	patch, err := json.Marshal(map[string]eventsv1.EventSeries{
		"series": {Count: s.count, LastObservedTime: metav1.NewMicroTime(s.last)},
	})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return r.sink.PatchEvent(wctx, eventNamespace(s.obs.ref), s.name, types.MergePatchType, patch)
}

func (r *Recorder) failed(ctx context.Context, what string, s *series, err error) {
	if ctx.Err() != nil {
		// Shutting down: the occurrences stay pending for Close.
		return
	}
	r.log.Warn(what+" failed", "reason", s.obs.key.reason, "object", s.obs.ref.Name, "error", err)
}

// newEvent builds the Event for s's pending occurrences.
func (r *Recorder) newEvent(s *series, now time.Time) *eventsv1.Event {
	// Named as client-go names them: object name and a hex timestamp, kept
	// increasing so two Events written in the same nanosecond differ.
	r.lastStamp = max(now.UnixNano(), r.lastStamp+1)
	ref := s.obs.ref
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", ref.Name, r.lastStamp),
			Namespace: eventNamespace(ref),
		},
		EventTime:           metav1.NewMicroTime(s.pendingSince),
		ReportingController: r.Controller,
		ReportingInstance:   r.Instance,
		Action:              s.obs.key.action,
		Reason:              s.obs.key.reason,
		Regarding:           ref,
		Note:                s.obs.key.note,
		Type:                s.obs.key.eventType,
	}
	if s.count > 1 {
		ev.Series = &eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(s.last)}
	}
	return ev
}

// eventNamespace is where Events regarding ref live: its own namespace, or
// default for a cluster-scoped object, as client-go's recorder puts them.
func eventNamespace(ref corev1.ObjectReference) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return metav1.NamespaceDefault
}
