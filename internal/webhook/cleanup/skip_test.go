package cleanup

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// A plugin that returns *Skip left something alone on purpose: the attempt
// succeeds, what runs after it runs, and its result is "skipped" with the
// reason.
func TestSkipIsNotAFailure(t *testing.T) {
	left := &fake{name: "local-volumes", run: func(context.Context) error {
		return &Skip{Reason: "left persistentvolumes pv-1 alone"}
	}}
	next := &fake{name: "portworx"}
	p := NewPipeline([]Stage{stage(left, true), stage(next, true, "local-volumes")}, false, nil, slog.New(slog.DiscardHandler))
	r := p.Run(context.Background(), testNode, 1)
	if r.Err != nil {
		t.Fatalf("attempt failed: %v, want success", r.Err)
	}
	got := map[string]PluginResult{}
	for _, pr := range r.Plugins {
		got[pr.Name] = pr
	}
	if lv := got["local-volumes"]; lv.Result != ResultSkipped || lv.Err == nil || !strings.Contains(lv.Err.Error(), "pv-1 alone") || lv.Failed() {
		t.Errorf("local-volumes = %+v, want skipped with the reason, not failed", lv)
	}
	if px := got["portworx"]; px.Result != ResultSuccess {
		t.Errorf("portworx, after local-volumes = %+v, want it run", px)
	}
	if s := r.Summary(); !strings.Contains(s, "local-volumes=skipped") {
		t.Errorf("summary %q, want local-volumes=skipped", s)
	}
}
