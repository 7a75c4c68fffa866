package nodecleanup

import (
	"errors"
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
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
		{name: "a failure without an error carries its result",
			finish: &cleanup.PluginResult{Name: "log", Result: cleanup.ResultTimeout},
			want:   map[string]string{"volumeattachments": "done", "notify": "skipped", "portworx": "failed: HTTP 500", "log": "failed: timeout"}},
	}
	for _, st := range steps {
		if st.finish != nil {
			s.finish(*st.finish)
		}
		if !maps.Equal(s.Plugins, st.want) {
			t.Errorf("%s: plugins = %v, want %v", st.name, s.Plugins, st.want)
		}
	}
	if s.Attempt != 2 || s.unfinished() != 0 {
		t.Errorf("attempt %d, unfinished %d; want 2 and 0", s.Attempt, s.unfinished())
	}
}

// A plugin cleanup counts as failed is failed in the document, unhealthy
// (left out by its health probe) included: the two sets agree.
func TestEveryFailedResultIsAFailedState(t *testing.T) {
	for _, result := range []string{cleanup.ResultSuccess, cleanup.ResultFailure, cleanup.ResultTimeout, cleanup.ResultPanic, cleanup.ResultSkipped, cleanup.ResultDryRun, cleanup.ResultUnhealthy} {
		for _, err := range []error{nil, errors.New("boom")} {
			r := cleanup.PluginResult{Name: "p", Result: result, Err: err}
			st, perr := api.ParsePluginState(pluginState(r).String())
			if perr != nil || st.Failed() != r.Failed() {
				t.Errorf("%s (error %v): state %q failed=%v, cleanup says failed=%v", result, err, pluginState(r), st.Failed(), r.Failed())
			}
		}
	}
}

// remove-finalizers reads from the status whether a cleanup is under way
// and why it is cut short.
func TestCleanupProgress(t *testing.T) {
	meta := func(status string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{}
		if status != "" {
			m.Annotations = map[string]string{StatusAnnotation: status}
		}
		return m
	}
	for _, tt := range []struct {
		name, status string
		running      bool
		reason       string
	}{
		{"no status yet", "", true, "no status yet"},
		{"running", `{"attempt":1,"plugins":{"portworx":"running","log":"done"}}`, true, "cleanup running (attempt 1): log: done; portworx: running"},
		{"failing", `{"attempt":3,"plugins":{"portworx":"failed: HTTP 500"},"retryIn":"20s"}`, false, "cleanup failing (attempt 3, next in 20s): portworx: failed: HTTP 500"},
	} {
		got := CleanupProgress(meta(tt.status))
		if got.Running != tt.running || !strings.Contains(got.Reason, tt.reason) {
			t.Errorf("%s: %+v, want running=%v and a reason with %q", tt.name, got, tt.running, tt.reason)
		}
	}
}
