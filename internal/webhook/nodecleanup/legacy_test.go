package nodecleanup

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const legacy = "infra.894.io/old-cleanup"

// A finalizer of ours under an older name is replaced by back-fill on a live
// node and removed with the current one from a node being deleted; nobody
// else's finalizer is touched.
func TestLegacyFinalizers(t *testing.T) {
	now := metav1.Now()
	t.Run("NeedsFinalizer", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			meta metav1.ObjectMeta
			want bool
		}{
			{"legacy only", metav1.ObjectMeta{Finalizers: []string{legacy}}, true},
			{"legacy beside the current one", metav1.ObjectMeta{Finalizers: []string{fin, legacy}}, true},
			{"current only", metav1.ObjectMeta{Finalizers: []string{"a/b", fin}}, false},
			{"legacy on a node being deleted", metav1.ObjectMeta{Finalizers: []string{legacy}, DeletionTimestamp: &now}, false},
		} {
			if got := NeedsFinalizer(&metav1.PartialObjectMetadata{ObjectMeta: tt.meta}, fin, legacy); got != tt.want {
				t.Errorf("%s: NeedsFinalizer = %v, want %v", tt.name, got, tt.want)
			}
		}
	})
	t.Run("back-fill replaces the legacy name", func(t *testing.T) {
		for _, tt := range []struct {
			name         string
			seen, stored []string
			want         []string
			wantErr      bool
		}{
			{"legacy only", []string{"a/b", legacy}, []string{"a/b", legacy}, []string{"a/b", fin}, false},
			{"both", []string{legacy, fin}, []string{legacy, fin}, []string{fin}, false},
			{"changed meanwhile", []string{legacy}, []string{legacy, "c/d"}, nil, true},
		} {
			raw, err := AddFinalizerPatch(tt.seen, fin, legacy)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := applyPatch(t, raw, metav1.ObjectMeta{Name: "n", Finalizers: tt.stored}, tt.wantErr)
			if ok && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s: finalizers = %v, want %v", tt.name, got, tt.want)
			}
		}
	})
	t.Run("removal takes every name of ours", func(t *testing.T) {
		current := []string{legacy, "a/b", fin, "c/d"}
		raw, err := RemoveFinalizerPatch("u1", current, fin, legacy)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := applyPatch(t, raw, metav1.ObjectMeta{Name: "n", UID: "u1", Finalizers: current}, false)
		if want := []string{"a/b", "c/d"}; !reflect.DeepEqual(got, want) {
			t.Errorf("finalizers = %v, want %v", got, want)
		}
	})
}

// TestShippedNamesAreAlwaysHonoured: a webhook renamed to a custom
// finalizer with no --legacy-finalizers (a chart rendered without Helm's
// lookup) still replaces the shipped name on a live node and removes it
// from a node being deleted after cleanup; someone else's stays.
func TestShippedNamesAreAlwaysHonoured(t *testing.T) {
	const custom = "example.com/custom-cleanup"
	renamed := func(c *Config) { c.Finalizer, c.Legacy = custom, nil }
	t.Run("back-fill replaces the shipped name", func(t *testing.T) {
		f := newFixture(t, renamed, meta("live", finalizers("a/b", fin)))
		got, err := f.syncBackfill("live")
		f.expect(got, err, "patch nodes live")
		if fs := f.finalizers("live"); !reflect.DeepEqual(fs, []string{"a/b", custom}) {
			t.Errorf("finalizers %q, want the shipped name replaced by %s", fs, custom)
		}
	})
	t.Run("cleanup removes the shipped name", func(t *testing.T) {
		f := newFixture(t, renamed, deleting("gone", finalizers(fin, "a/b")))
		f.pipeline = pipelineOf([]*plugin{{name: "p"}})
		got, err := f.syncCleanup("gone", 0)
		f.expect(got, err, "patch nodes gone")
		if fs := f.finalizers("gone"); !reflect.DeepEqual(fs, []string{"a/b"}) {
			t.Errorf("finalizers %q, want only someone else's left", fs)
		}
	})
}
