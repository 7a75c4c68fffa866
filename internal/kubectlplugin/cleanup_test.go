package kubectlplugin

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

func TestParseCleanupStatus(t *testing.T) {
	tests := []struct {
		name        string
		value       string
		wantErr     string
		wantSummary string
	}{
		{name: "a failed attempt waiting for its retry",
			value:       `{"attempt":2,"plugins":{"volumeattachments":"done","portworx":"failed: portworx: HTTP 500","log":"skipped: after portworx failed"},"retryIn":"20s"}`,
			wantSummary: "attempt 2, 1 failed"},
		{name: "running and pending",
			value:       `{"attempt":1,"plugins":{"volumeattachments":"running","notify":"running","portworx":"pending"}}`,
			wantSummary: "attempt 1, 2 running, 1 pending"},
		{name: "all finished",
			value:       `{"attempt":1,"plugins":{"volumeattachments":"done","notify":"dry run","log":"skipped"}}`,
			wantSummary: "attempt 1, 3 done"},
		{name: "a failure without an error is the bare result",
			value:       `{"attempt":3,"plugins":{"hook":"timeout","log":"panic","a":"failure"}}`,
			wantSummary: "attempt 3, 3 failed"},
		{name: "unknown fields are ignored", value: `{"attempt":1,"plugins":{},"next":"x"}`, wantSummary: "attempt 1, 0 done"},
		{name: "not JSON", value: `{attempt: 2`, wantErr: "not JSON"},
		{name: "empty", value: ``, wantErr: "not JSON"},
		{name: "a JSON string", value: `"done"`, wantErr: "not JSON"},
		{name: "wrong types", value: `{"attempt":"two","plugins":{}}`, wantErr: "not JSON"},
		{name: "plugin state not a string", value: `{"attempt":1,"plugins":{"log":3}}`, wantErr: "not JSON"},
		{name: "no attempt", value: `{"plugins":{"log":"done"}}`, wantErr: "attempt 0"},
		{name: "no plugins", value: `{"attempt":1}`, wantErr: "no plugins"},
		{name: "null", value: `null`, wantErr: "attempt 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseCleanupStatus(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Summary(); got != tt.wantSummary {
				t.Errorf("Summary = %q, want %q", got, tt.wantSummary)
			}
		})
	}
}

func TestPluginNamesFailedFirst(t *testing.T) {
	s := &CleanupStatus{api.CleanupStatus{Attempt: 1, Plugins: map[string]string{"b": "done", "z": "failed: x", "a": "running", "c": "timeout"}}}
	if got, want := s.PluginNames(), []string{"c", "z", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("PluginNames = %v, want %v", got, want)
	}
}

func TestCleanupOf(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC))
	node := func(deleting bool, finalizers []string, annotations map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: finalizers, Annotations: annotations}}
		if deleting {
			n.DeletionTimestamp = &deleted
		}
		return n
	}
	ours := []string{api.Finalizer}
	status := `{"attempt":2,"plugins":{"portworx":"failed: HTTP 500","log":"done"},"retryIn":"20s"}`
	tests := []struct {
		name        string
		node        *corev1.Node
		wantState   string
		wantSummary string
		wantErr     bool
	}{
		{name: "a live node", node: node(false, ours, nil), wantState: CleanupNone, wantSummary: "none"},
		{name: "skip set in advance", node: node(false, ours, map[string]string{api.SkipCleanupAnnotation: "true"}), wantState: CleanupSkip, wantSummary: "skip"},
		{name: "skip annotation not true", node: node(false, ours, map[string]string{api.SkipCleanupAnnotation: "yes"}), wantState: CleanupNone, wantSummary: "none"},
		{name: "deleting, webhook not started", node: node(true, ours, nil), wantState: CleanupDeleting, wantSummary: "deleting: not started"},
		{name: "deleting with a status", node: node(true, ours, map[string]string{api.CleanupStatusAnnotation: status}),
			wantState: CleanupDeleting, wantSummary: "deleting: attempt 2, 1 failed"},
		{name: "deleting with a malformed status: unreadable, not a crash",
			node:      node(true, ours, map[string]string{api.CleanupStatusAnnotation: `{"attempt":2,"plugins":`}),
			wantState: CleanupDeleting, wantSummary: "deleting: status unreadable", wantErr: true},
		{name: "deleting, skip requested", node: node(true, ours, map[string]string{api.SkipCleanupAnnotation: "true", api.CleanupStatusAnnotation: status}),
			wantState: CleanupDeleting, wantSummary: "deleting: skip requested"},
		{name: "deleting, held by someone else's finalizer", node: node(true, []string{"example.com/other"}, nil),
			wantState: CleanupDeleting, wantSummary: "deleting: finalizer gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := CleanupOf(tt.node)
			if c.State != tt.wantState || c.Summary != tt.wantSummary {
				t.Errorf("state %q summary %q, want %q %q", c.State, c.Summary, tt.wantState, tt.wantSummary)
			}
			if (c.StatusError != "") != tt.wantErr {
				t.Errorf("status error %q, want one: %t", c.StatusError, tt.wantErr)
			}
			if tt.wantState == CleanupDeleting && (c.DeletionTimestamp == nil || !c.DeletionTimestamp.Equal(&deleted)) {
				t.Errorf("deletion timestamp %v, want %v", c.DeletionTimestamp, deleted)
			}
		})
	}
}

// FuzzParseCleanupStatus: whatever the annotation holds, reading and
// summarizing it never panics.
func FuzzParseCleanupStatus(f *testing.F) {
	f.Add(`{"attempt":2,"plugins":{"portworx":"failed: HTTP 500"},"retryIn":"20s"}`)
	f.Add(`{"attempt":1,"plugins":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, value string) {
		s, err := ParseCleanupStatus(value)
		if err != nil {
			return
		}
		_ = s.Summary()
		_ = s.PluginNames()
	})
}
