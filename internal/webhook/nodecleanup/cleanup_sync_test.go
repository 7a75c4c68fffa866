package nodecleanup

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// deleting is a node being deleted that carries our finalizer beside someone else's.
func deleting(name string, opts ...nodeOpt) *metav1.PartialObjectMetadata {
	return meta(name, append([]nodeOpt{deletedAgo(time.Second), finalizers("a/b", fin)}, opts...)...)
}

// statusOf is the cleanup status annotation of the API server's node.
func (f *fixture) statusOf(name string) cleanupStatus {
	f.t.Helper()
	var s cleanupStatus
	raw, ok := f.node(name).Annotations[StatusAnnotation]
	if !ok {
		f.t.Fatalf("node %s has no %s", name, StatusAnnotation)
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		f.t.Fatal(err)
	}
	return s
}

func TestCleanupRunsThePluginsThenRemovesOnlyOurFinalizers(t *testing.T) {
	n := deleting("n", finalizers(legacy, "a/b", fin))
	f := newFixture(t, func(c *Config) { c.Legacy = []string{legacy} }, n)
	p := &plugin{name: "p"}
	f.pipeline = pipelineOf([]*plugin{p})
	got, err := f.syncCleanup("n", 0)
	f.expect(got, err, "patch nodes n")
	if fs := f.finalizers("n"); !slices.Equal(fs, []string{"a/b"}) {
		t.Errorf("finalizers %q, want only someone else's left", fs)
	}
	if calls := p.calls(); !slices.Equal(calls, []types.UID{n.UID}) {
		t.Errorf("plugin called for %v, want once for %s", calls, n.UID)
	}
	f.expectEvents(api.EventCleanupStarted, api.EventCleanupCompleted)
	if f.count("completed") != 1 {
		t.Errorf("completed = %v, want 1", f.count("completed"))
	}
}

// A failing critical plugin keeps the finalizer and shows why on the node;
// a retry shows its status at once and tells no second start.
func TestCleanupFailureKeepsTheFinalizer(t *testing.T) {
	f := newFixture(t, nil, deleting("n"))
	f.pipeline = pipelineOf([]*plugin{{name: "p", err: errBoom}})
	got, err := f.syncCleanup("n", 0)
	if err == nil {
		t.Fatal("a failed cleanup returned no error: it would not be retried")
	}
	f.expect(got, nil, "patch nodes n") // the status
	if fs := f.finalizers("n"); !slices.Equal(fs, []string{"a/b", fin}) {
		t.Errorf("finalizers %q, want ours kept", fs)
	}
	if s := f.statusOf("n"); s.Attempt != 1 || s.RetryIn != "1s" || s.Plugins["p"] != "failed: boom" {
		t.Errorf("status %+v, want attempt 1, retry in 1s, p failed: boom", s)
	}
	f.expectEvents(api.EventCleanupStarted, api.EventCleanupFailed)

	got, err = f.syncCleanup("n", 1)
	if err == nil {
		t.Fatal("a failed retry returned no error")
	}
	f.expect(got, nil, "patch nodes n", "patch nodes n") // running, then failed
	if s := f.statusOf("n"); s.Attempt != 2 || s.RetryIn != "2s" {
		t.Errorf("status %+v, want attempt 2, retry in 2s", s)
	}
	f.expectEvents(api.EventCleanupFailed)
	if f.count("failed") != 2 {
		t.Errorf("failed = %v, want 2", f.count("failed"))
	}
}

// An optional plugin's failure is told and does not hold the node.
func TestOptionalPluginFailureDoesNotHoldTheNode(t *testing.T) {
	f := newFixture(t, nil, deleting("n"))
	f.pipeline = pipelineOf([]*plugin{{name: "critical"}, {name: "optional", err: errBoom}}, "optional")
	got, err := f.syncCleanup("n", 0)
	f.expect(got, err, "patch nodes n")
	if fs := f.finalizers("n"); !slices.Equal(fs, []string{"a/b"}) {
		t.Errorf("finalizers %q, want ours removed", fs)
	}
	f.expectEvents(api.EventCleanupStarted, api.EventCleanupPluginFailed, api.EventCleanupCompleted)
}

// The bypass annotation removes the finalizer without running a plugin.
func TestSkipAnnotationBypassesTheCleanup(t *testing.T) {
	f := newFixture(t, nil, deleting("n", annotated(skipAnnotation, "true")))
	p := &plugin{name: "p"}
	f.pipeline = pipelineOf([]*plugin{p})
	got, err := f.syncCleanup("n", 0)
	f.expect(got, err, "patch nodes n")
	if len(p.calls()) != 0 {
		t.Error("a plugin ran for a bypassed node")
	}
	if fs := f.finalizers("n"); !slices.Equal(fs, []string{"a/b"}) {
		t.Errorf("finalizers %q, want ours removed", fs)
	}
	f.expectEvents(api.EventCleanupSkipped)
	if f.count("skipped") != 1 {
		t.Errorf("skipped = %v, want 1", f.count("skipped"))
	}
}

// Without a valid configuration nothing runs and the finalizer stays, said
// once per node.
func TestInvalidConfigurationHoldsTheDeletion(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ConfigError = func() error { return errors.New("plugins.notify: bad url") } }, deleting("n"))
	for range 2 {
		got, err := f.syncCleanup("n", 0)
		if !errors.Is(err, errHeld) || len(got) != 0 {
			t.Fatalf("sync = %v with requests %q, want errHeld and none", err, got)
		}
	}
	if e := f.expectEvents(api.EventCleanupHeld); len(e) == 1 && !strings.Contains(e[0], "bad url") {
		t.Errorf("event %q does not say why", e[0])
	}
	if f.count("held") != 1 {
		t.Errorf("held = %v, want 1", f.count("held"))
	}
}

func TestCleanupDoesNothing(t *testing.T) {
	for name, n := range map[string]*metav1.PartialObjectMetadata{
		"not being deleted":                   meta("n", finalizers(fin)),
		"being deleted without our finalizer": meta("n", deletedAgo(time.Second), finalizers("a/b")),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil, n)
			p := &plugin{name: "p"}
			f.pipeline = pipelineOf([]*plugin{p})
			got, err := f.syncCleanup("n", 0)
			f.expect(got, err)
			if len(p.calls()) != 0 {
				t.Error("a plugin ran")
			}
		})
	}
	t.Run("gone from the cache", func(t *testing.T) {
		f := newFixture(t, nil)
		got, err := f.syncCleanup("n", 0)
		f.expect(got, err)
	})
}

// Past the deadline and after MinAttempts real attempts the finalizer goes,
// loudly; before, it stays.
func TestCleanupDeadlineReleasesAfterRealAttempts(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Deadline, c.MinAttempts = time.Minute, 2 }, deleting("n", deletedAgo(time.Hour)))
	f.pipeline = pipelineOf([]*plugin{{name: "p", err: errBoom}})
	if _, err := f.syncCleanup("n", 0); err == nil {
		t.Fatal("released after one attempt")
	}
	f.expectEvents(api.EventCleanupStarted, api.EventCleanupFailed)
	got, err := f.syncCleanup("n", 1)
	f.expect(got[len(got)-1:], err, "patch nodes n")
	if fs := f.finalizers("n"); !slices.Equal(fs, []string{"a/b"}) {
		t.Errorf("finalizers %q, want ours removed past the deadline", fs)
	}
	f.expectEvents(api.EventCleanupDeadlineExceeded)
	if f.count("deadline_exceeded") != 1 {
		t.Errorf("deadline_exceeded = %v, want 1", f.count("deadline_exceeded"))
	}
}

// probedPlugin is a plugin whose health probe fails: an attempt leaves it
// out (unhealthy) instead of calling it.
type probedPlugin struct {
	plugin
	probes atomic.Int32
}

func (p *probedPlugin) Health(context.Context) error {
	p.probes.Add(1)
	return errors.New("HTTP 503")
}

// A critical plugin whose health probe keeps failing holds a node no longer
// than the deadline either (issue 35): each attempt that leaves it out on a
// probe of its own — newer than the node's previous attempt, however fresh
// the shared verdict is — counts, and after MinAttempts of them past the
// deadline the finalizer goes with CleanupDeadlineExceeded. The plugin is
// never called.
func TestCleanupDeadlineReleasesANodeWhosePluginIsUnhealthy(t *testing.T) {
	health, err := cleanup.NewHealth(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Deadline, c.MinAttempts, c.Health = time.Minute, 3, health }, deleting("n", deletedAgo(time.Hour)))
	hook := &probedPlugin{plugin: plugin{name: "hook"}}
	f.pipeline = cleanup.NewPipeline([]cleanup.Stage{{Plugin: hook, Spec: cleanup.Spec{Enabled: true, Critical: true, Timeout: 5 * time.Second}}},
		false, nil, slog.New(slog.DiscardHandler))
	for attempt := range 2 {
		if _, err := f.syncCleanup("n", attempt); err == nil {
			t.Fatalf("released after %d attempts, want 3", attempt+1)
		}
	}
	f.expectEvents(api.EventCleanupStarted, api.EventCleanupFailed, api.EventCleanupFailed)
	got, err := f.syncCleanup("n", 2)
	f.expect(got[len(got)-1:], err, "patch nodes n")
	if fs := f.finalizers("n"); !slices.Equal(fs, []string{"a/b"}) {
		t.Errorf("finalizers %q, want ours removed past the deadline", fs)
	}
	notes := f.expectEvents(api.EventCleanupDeadlineExceeded)
	if len(notes) == 1 && !strings.Contains(notes[0], "after 3 attempts that called or probed the critical plugins") {
		t.Errorf("event %q, want it to say how many attempts asked", notes[0])
	}
	if n := hook.probes.Load(); n != 3 {
		t.Errorf("%d health probes, want 3: one of its own for each attempt", n)
	}
	if calls := hook.calls(); len(calls) != 0 {
		t.Errorf("unhealthy plugin called %d times, want 0", len(calls))
	}
}

// A deadline that comes before the next retry is looked at when it passes.
func TestCleanupDeadlineBeforeTheRetry(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Deadline, c.RetryBase = time.Minute, 30*time.Second }, deleting("n", deletedAgo(50*time.Second)))
	f.pipeline = pipelineOf([]*plugin{{name: "p", err: errBoom}})
	_, err := f.syncCleanup("n", 0)
	var due *deadlineDue
	if !errors.As(err, &due) || due.in <= 0 || due.in > 10*time.Second || !strings.Contains(err.Error(), "boom") {
		t.Errorf("sync = %v, want a deadlineDue in about 10s wrapping the failure", err)
	}
}

// The finalizer removal is bound to the UID the cleanup ran for and to the
// list it read: a node re-created under the name keeps its finalizer, and a
// list someone changed meanwhile is read again.
func TestFinalizerRemovalIsGuarded(t *testing.T) {
	t.Run("node re-created under the name", func(t *testing.T) {
		n := deleting("n")
		f := newFixture(t, nil, n)
		again := recreated(n)
		f.stored(again)
		f.pipeline = pipelineOf([]*plugin{{name: "p"}})
		got, err := f.syncCleanup("n", 0)
		f.expect(got, err, "patch nodes n", "get nodes n")
		if fs := f.finalizers("n"); !slices.Equal(fs, again.Finalizers) {
			t.Errorf("finalizers of the new incarnation %q, want %q", fs, again.Finalizers)
		}
		if f.count("completed") != 0 {
			t.Error("a cleanup counted completed for a node it did not release")
		}
	})
	t.Run("list changed meanwhile", func(t *testing.T) {
		n := deleting("n")
		f := newFixture(t, nil, n)
		changed := n.DeepCopy()
		changed.Finalizers = []string{"x/y", "a/b", fin}
		f.stored(changed)
		f.pipeline = pipelineOf([]*plugin{{name: "p"}})
		got, err := f.syncCleanup("n", 0)
		f.expect(got, err, "patch nodes n", "get nodes n", "patch nodes n")
		if fs := f.finalizers("n"); !slices.Equal(fs, []string{"x/y", "a/b"}) {
			t.Errorf("finalizers %q, want only ours removed", fs)
		}
	})
	t.Run("API server error", func(t *testing.T) {
		f := newFixture(t, nil, deleting("n"))
		f.fail("patch", apierrors.NewInternalError(errBoom))
		f.pipeline = pipelineOf([]*plugin{{name: "p"}})
		if _, err := f.syncCleanup("n", 0); err == nil {
			t.Error("a failed finalizer removal returned no error: it would not be retried")
		}
	})
}

// What the informer delivers while the plugins run cuts the run short: the
// bypass annotation removes the finalizer at once; a node re-created under
// the name is left alone.
func TestChangesDuringTheRun(t *testing.T) {
	t.Run("bypass annotation set", func(t *testing.T) {
		n := deleting("n")
		f := newFixture(t, nil, n)
		f.pipeline = pipelineOf([]*plugin{{name: "p", during: func() {
			bypassed := n.DeepCopy()
			annotated(skipAnnotation, "true")(bypassed)
			f.stored(bypassed)
			f.cache(bypassed)
			f.c.observe(bypassed, false)
		}}})
		_, err := f.syncCleanup("n", 0)
		if err != nil {
			t.Fatal(err)
		}
		if fs := f.finalizers("n"); !slices.Equal(fs, []string{"a/b"}) {
			t.Errorf("finalizers %q, want ours removed by the bypass", fs)
		}
		f.expectEvents(api.EventCleanupStarted, api.EventCleanupSkipped)
	})
	t.Run("node re-created", func(t *testing.T) {
		n := deleting("n")
		f := newFixture(t, nil, n)
		again := recreated(n)
		f.pipeline = pipelineOf([]*plugin{{name: "p", during: func() {
			f.stored(again)
			f.cache(again)
			f.c.observe(again, true)
		}}})
		got, err := f.syncCleanup("n", 0)
		f.expect(got, err)
		if fs := f.finalizers("n"); !slices.Equal(fs, again.Finalizers) {
			t.Errorf("finalizers %q of the new incarnation changed", fs)
		}
	})
}
