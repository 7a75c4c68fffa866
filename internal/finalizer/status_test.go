package finalizer

import (
	"errors"
	"maps"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/cleanup"
)

func TestCleanupStatusFollowsThePipeline(t *testing.T) {
	after := map[string][]string{"volumeattachments": {}, "portworx": {"volumeattachments"}, "log": {"portworx"}, "notify": {}}
	s := newStatus(after, 2)
	steps := []struct {
		name   string
		finish *cleanup.PluginResult
		want   map[string]string
	}{
		{name: "start: plugins with no predecessor run",
			want: map[string]string{"volumeattachments": "running", "notify": "running", "portworx": "pending", "log": "pending"}},
		{name: "a finished plugin releases the next",
			finish: &cleanup.PluginResult{Name: "volumeattachments", Result: cleanup.ResultSuccess},
			want:   map[string]string{"volumeattachments": "done", "notify": "running", "portworx": "running", "log": "pending"}},
		{name: "a failure carries its reason",
			finish: &cleanup.PluginResult{Name: "portworx", Critical: true, Result: cleanup.ResultFailure, Err: errors.New("HTTP 500")},
			want:   map[string]string{"volumeattachments": "done", "notify": "running", "portworx": "failed: HTTP 500", "log": "running"}},
		{name: "a plugin that did not apply is skipped",
			finish: &cleanup.PluginResult{Name: "notify", Result: cleanup.ResultSkipped},
			want:   map[string]string{"volumeattachments": "done", "notify": "skipped", "portworx": "failed: HTTP 500", "log": "running"}},
	}
	for _, st := range steps {
		if st.finish != nil {
			s.finish(*st.finish)
		}
		if !maps.Equal(s.Plugins, st.want) {
			t.Errorf("%s: plugins = %v, want %v", st.name, s.Plugins, st.want)
		}
	}
	if s.Attempt != 2 || s.unfinished() != 1 {
		t.Errorf("attempt %d, unfinished %d; want 2 and 1", s.Attempt, s.unfinished())
	}
}
