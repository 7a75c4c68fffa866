package nodecleanup

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
)

var errBoom = errors.New("boom")

// fail makes the fake API server answer verb on nodes with err.
func (f *fixture) fail(verb string, err error) {
	f.client.PrependReactor(verb, "nodes", func(core.Action) (bool, runtime.Object, error) { return true, nil, err })
}

func TestBackfill(t *testing.T) {
	tests := []struct {
		name string
		node *metav1.PartialObjectMetadata
		// paused is what Config.BackfillAllowed answers, negated.
		paused         bool
		wantRequests   []string
		wantFinalizers []string
	}{
		{name: "adds the finalizer after the others", node: meta("n", finalizers("a/b")),
			wantRequests: []string{"patch nodes n"}, wantFinalizers: []string{"a/b", fin}},
		{name: "adds the finalizer to a node without any", node: meta("n"),
			wantRequests: []string{"patch nodes n"}, wantFinalizers: []string{fin}},
		{name: "replaces a legacy name", node: meta("n", finalizers(legacy, "a/b")),
			wantRequests: []string{"patch nodes n"}, wantFinalizers: []string{"a/b", fin}},
		{name: "does nothing to a node that has it", node: meta("n", finalizers(fin)), wantFinalizers: []string{fin}},
		{name: "does nothing to a node being deleted", node: meta("n", deletedAgo(time.Second), finalizers("a/b")), wantFinalizers: []string{"a/b"}},
		{name: "paused while the webhook configuration is absent", node: meta("n"), paused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) {
				c.Legacy = []string{legacy}
				c.BackfillAllowed = func(context.Context) bool { return !tt.paused }
			}, tt.node)
			got, err := f.syncBackfill("n")
			f.expect(got, err, tt.wantRequests...)
			if fs := f.finalizers("n"); !slices.Equal(fs, tt.wantFinalizers) {
				t.Errorf("finalizers %q, want %q", fs, tt.wantFinalizers)
			}
			if want := float64(len(tt.wantRequests)); testutil.ToFloat64(f.c.patches.WithLabelValues("success")) != want {
				t.Errorf("back-fill successes %v, want %v", testutil.ToFloat64(f.c.patches.WithLabelValues("success")), want)
			}
		})
	}
}

// A node gone from the cache, or from the API server before the patch
// lands, is done; any other failed patch is retried (an error) and counted.
func TestBackfillOfAGoneNodeIsDoneAndAFailedPatchRetried(t *testing.T) {
	f := newFixture(t, nil, meta("n"))
	got, err := f.syncBackfill("absent")
	f.expect(got, err)

	f.fail("patch", apierrors.NewNotFound(NodesResource.GroupResource(), "n"))
	got, err = f.syncBackfill("n")
	f.expect(got, err, "patch nodes n")

	f = newFixture(t, nil, meta("n"))
	f.fail("patch", apierrors.NewInternalError(errBoom))
	if _, err := f.syncBackfill("n"); err == nil {
		t.Error("a failed back-fill patch returned no error: it would not be retried")
	}
	if got := testutil.ToFloat64(f.c.patches.WithLabelValues("error")); got != 1 {
		t.Errorf("back-fill errors %v, want 1", got)
	}
}

// The back-fill patch tests the finalizer list the cache showed: a list
// someone changed since is never overwritten; the sync fails and is retried
// on the cache's next view.
func TestBackfillNeverOverwritesAConcurrentWrite(t *testing.T) {
	n := meta("n", finalizers("a/b"))
	f := newFixture(t, nil, n)
	changed := n.DeepCopy()
	changed.Finalizers = []string{"a/b", "c/d"}
	f.stored(changed)
	if _, err := f.syncBackfill("n"); !apierrors.IsInvalid(err) {
		t.Errorf("sync = %v, want the API server's refusal", err)
	}
	if fs := f.finalizers("n"); !slices.Equal(fs, []string{"a/b", "c/d"}) {
		t.Errorf("finalizers %q, want the concurrent write kept", fs)
	}
}
