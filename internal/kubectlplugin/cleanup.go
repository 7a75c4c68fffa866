package kubectlplugin

import (
	"slices"

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
	Status *api.CleanupStatus `json:"status,omitempty"`
	// StatusError says why a present status annotation could not be read.
	StatusError string `json:"statusError,omitempty"`
}

// CleanupOf reads where the node's cleanup stands from its deletion
// timestamp, finalizers and annotations.
func CleanupOf(node *corev1.Node) Cleanup {
	c := Cleanup{State: CleanupNone, SkipRequested: node.Annotations[api.SkipCleanupAnnotation] == "true"}
	if value, ok := node.Annotations[api.CleanupStatusAnnotation]; ok {
		s, err := api.ParseCleanupStatus(value)
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
