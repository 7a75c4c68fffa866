package kubectlplugin

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Cleanup states of a node, as Cleanup.State.
const (
	CleanupNone     = "none"     // not being deleted, no skip requested
	CleanupSkip     = "skip"     // not being deleted; skip-cleanup set for when it is
	CleanupDeleting = "deleting" // deletionTimestamp set
)

// CleanupStatus is the webhook's cleanup status document, read back, with
// what the plugin shows of it.
type CleanupStatus struct {
	api.CleanupStatus
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

// ParseCleanupStatus reads the status annotation's value (see
// api.ParseCleanupStatus: anything else is an error, never a panic).
func ParseCleanupStatus(value string) (*CleanupStatus, error) {
	s, err := api.ParseCleanupStatus(value)
	if err != nil {
		return nil, err
	}
	return &CleanupStatus{*s}, nil
}

// Counts tallies the plugins by kind of state: failed, running, pending,
// and finished (done, skipped, dry run).
func (s *CleanupStatus) Counts() (failed, running, pending, finished int) {
	for _, st := range s.Plugins {
		switch {
		case api.PluginStateFailed(st):
			failed++
		case st == api.PluginRunning:
			running++
		case st == api.PluginPending:
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
		fa, fb := api.PluginStateFailed(s.Plugins[a]), api.PluginStateFailed(s.Plugins[b])
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
	c := Cleanup{State: CleanupNone, SkipRequested: node.Annotations[api.SkipCleanupAnnotation] == "true"}
	if value, ok := node.Annotations[api.CleanupStatusAnnotation]; ok {
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
	case !slices.Contains(node.Finalizers, api.Finalizer):
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
