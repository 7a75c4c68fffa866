package kubectlplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cleanup states of a node, as Cleanup.State.
const (
	CleanupNone     = "none"     // not being deleted, no skip requested
	CleanupSkip     = "skip"     // not being deleted; skip-cleanup set for when it is
	CleanupDeleting = "deleting" // deletionTimestamp set
)

// CleanupStatus is the webhook's cleanup status annotation, read back.
type CleanupStatus struct {
	// Attempt counts cleanup attempts of the webhook replica, from 1.
	Attempt int `json:"attempt"`
	// Plugins maps each enabled plugin to its state: pending, running, done,
	// skipped[: reason], dry run, failed: reason.
	Plugins map[string]string `json:"plugins"`
	// RetryIn is the delay before the next attempt, after a failed one.
	RetryIn string `json:"retryIn,omitempty"`
}

// Cleanup is where a node's cleanup stands.
type Cleanup struct {
	// State is none, skip or deleting.
	State string `json:"state"`
	// Summary is the CLEANUP column: none, skip, or deleting: and what the
	// status annotation says.
	Summary string `json:"summary"`
	// DeletionTimestamp is when the node was deleted.
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
	// SkipRequested is whether the skip-cleanup annotation is true.
	SkipRequested bool `json:"skipRequested"`
	// Status is the status annotation, when present and readable.
	Status *CleanupStatus `json:"status,omitempty"`
	// StatusError says why a present status annotation could not be read.
	StatusError string `json:"statusError,omitempty"`
}

// ParseCleanupStatus reads the status annotation's value. Anything that is
// not the JSON object the webhook writes is an error, never a panic: the
// annotation is on an object anyone with patch rights can edit.
func ParseCleanupStatus(value string) (*CleanupStatus, error) {
	var s CleanupStatus
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if s.Attempt < 1 {
		return nil, fmt.Errorf("attempt %d, want 1 or more", s.Attempt)
	}
	if s.Plugins == nil {
		return nil, errors.New("no plugins")
	}
	return &s, nil
}

// pluginFailed reports whether a plugin state is a failure: "failed: reason",
// or the bare result the webhook writes when a failure has no error.
func pluginFailed(state string) bool {
	return strings.HasPrefix(state, "failed") || state == "failure" || state == "timeout" || state == "panic"
}

// Counts tallies the plugins by kind of state: failed, running, pending,
// and finished (done, skipped, dry run).
func (s *CleanupStatus) Counts() (failed, running, pending, finished int) {
	for _, st := range s.Plugins {
		switch {
		case pluginFailed(st):
			failed++
		case st == "running":
			running++
		case st == "pending":
			pending++
		default:
			finished++
		}
	}
	return
}

// Summary is the attempt and what holds the cleanup up, such as
// "attempt 2, 1 failed" or "attempt 1, 2 running, 1 pending"; when every
// plugin finished, "attempt 1, 3 done".
func (s *CleanupStatus) Summary() string {
	failed, running, pending, finished := s.Counts()
	parts := []string{fmt.Sprintf("attempt %d", s.Attempt)}
	for _, c := range []struct {
		n    int
		what string
	}{{failed, "failed"}, {running, "running"}, {pending, "pending"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 1 {
		parts = append(parts, fmt.Sprintf("%d done", finished))
	}
	return strings.Join(parts, ", ")
}

// PluginNames are the plugins of the status, failed ones first, then by name.
func (s *CleanupStatus) PluginNames() []string {
	names := make([]string, 0, len(s.Plugins))
	for name := range s.Plugins {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		fa, fb := pluginFailed(s.Plugins[a]), pluginFailed(s.Plugins[b])
		switch {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}

// CleanupOf reads where the node's cleanup stands from its deletion
// timestamp, finalizers and annotations.
func CleanupOf(node *corev1.Node) Cleanup {
	c := Cleanup{State: CleanupNone, SkipRequested: node.Annotations[SkipCleanupAnnotation] == "true"}
	if value, ok := node.Annotations[CleanupStatusAnnotation]; ok {
		s, err := ParseCleanupStatus(value)
		if err != nil {
			c.StatusError = err.Error()
		}
		c.Status = s
	}
	if node.DeletionTimestamp == nil {
		c.Summary = CleanupNone
		if c.SkipRequested {
			c.State, c.Summary = CleanupSkip, CleanupSkip
		}
		return c
	}
	c.State, c.DeletionTimestamp = CleanupDeleting, node.DeletionTimestamp
	detail := ""
	switch {
	case !slices.Contains(node.Finalizers, Finalizer):
		detail = "finalizer gone"
	case c.SkipRequested:
		detail = "skip requested"
	case c.StatusError != "":
		detail = "status unreadable"
	case c.Status != nil:
		detail = c.Status.Summary()
	default:
		detail = "not started"
	}
	c.Summary = CleanupDeleting + ": " + detail
	return c
}
