package kubectlplugin

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

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
