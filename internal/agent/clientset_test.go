package agent

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

func TestEventRecorderNotes(t *testing.T) {
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-n1"}
	tests := []struct {
		name   string
		format string
		args   []any
		want   string
	}{
		{"formatted", "checks failed %d rounds in a row; taint %s applied", []any{3, "node-ready/unhealthy"},
			"Warning NodeRetainted checks failed 3 rounds in a row; taint node-ready/unhealthy applied"},
		{"a percent sign in an argument stays", "check failed: %s", []any{"100% loss"}, "Warning NodeRetainted check failed: 100% loss"},
		{"cut to the API server's limit", "%s", []any{strings.Repeat("x", 3*eventnote.MaxBytes)},
			"Warning NodeRetainted " + eventnote.Shorten(strings.Repeat("x", 3*eventnote.MaxBytes))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := events.NewFakeRecorder(1)
			EventRecorder{Recorder: fake}.Eventf(ref, corev1.EventTypeWarning, api.EventNodeRetainted, "Taint", tt.format, tt.args...)
			if got := <-fake.Events; got != tt.want {
				t.Errorf("Event %q, want %q", got, tt.want)
			}
		})
	}
}
