package watches

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// TestEpisodesLogOncePerEpisode: a refusal is logged once however often
// the reflector retries, its recovery once, and the normal ends of a watch
// not at all.
func TestEpisodesLogOncePerEpisode(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e := New(log, &corev1.Node{}, "field_selector", "metadata.name=n1")
	refuse := false
	lw := e.ListWatch(
		func(context.Context, metav1.ListOptions) (runtime.Object, error) { return &corev1.NodeList{}, nil },
		func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.TimeoutSeconds == nil || *o.TimeoutSeconds < int64(MinTimeout.Seconds()) {
				t.Errorf("watch timeout %v, want at least %v", o.TimeoutSeconds, MinTimeout)
			}
			if refuse {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no watch"))
			}
			return watch.NewFake(), nil
		})
	tryWatch := func() {
		w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{})
		if err != nil {
			e.Failed(err)
			return
		}
		w.Stop()
	}
	count := func(msg string) int { return strings.Count(buf.String(), "msg=\""+msg) }

	tryWatch() // healthy: nothing to say
	e.Failed(io.EOF)
	e.Failed(apierrors.NewResourceExpired("too old"))
	if buf.Len() != 0 {
		t.Fatalf("logged without a refusal:\n%s", buf.String())
	}
	refuse = true
	for range 5 {
		tryWatch()
	}
	refuse = false
	tryWatch()
	tryWatch()
	if r, ok := count("watch refused"), count("watch recovered"); r != 1 || ok != 1 {
		t.Errorf("%d refused and %d recovered lines, want one each:\n%s", r, ok, buf.String())
	}
	if !strings.Contains(buf.String(), "refusals=5") || !strings.Contains(buf.String(), `watch=*v1.Node field_selector="metadata.name=n1"`) {
		t.Errorf("lines lack their context:\n%s", buf.String())
	}
	refuse = true
	tryWatch()
	if r := count("watch refused"); r != 2 {
		t.Errorf("a second episode logged %d refused lines in all, want 2", r)
	}
}
