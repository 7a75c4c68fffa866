package nodecleanup

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Progress is where the cleanup of a node being deleted stands, as its
// StatusAnnotation shows it: what remove-finalizers reports for each node
// whose cleanup it cuts short.
type Progress struct {
	// Running is true while an attempt may be under way: plugins running or
	// pending, or no status yet (a first attempt shows none for its first
	// seconds, and none has started while the webhook is down).
	Running bool
	// Reason says so in words, with the attempt and each plugin's state.
	Reason string
}

// CleanupProgress reads m's cleanup status.
func CleanupProgress(m *metav1.PartialObjectMetadata) Progress {
	raw, ok := m.Annotations[StatusAnnotation]
	if !ok {
		return Progress{Running: true, Reason: "cleanup not started or just started (no status yet)"}
	}
	st, err := api.ParseCleanupStatus(raw)
	if err != nil {
		return Progress{Running: true, Reason: "cleanup status unreadable: " + err.Error()}
	}
	s := cleanupStatus{CleanupStatus: *st}
	states := make([]string, 0, len(s.Plugins))
	for name, st := range s.Plugins {
		states = append(states, name+": "+st)
	}
	sort.Strings(states)
	if s.RetryIn != "" {
		return Progress{Reason: fmt.Sprintf("cleanup failing (attempt %d, next in %s): %s", s.Attempt, s.RetryIn, strings.Join(states, "; "))}
	}
	return Progress{Running: s.unfinished() > 0, Reason: fmt.Sprintf("cleanup running (attempt %d): %s", s.Attempt, strings.Join(states, "; "))}
}
