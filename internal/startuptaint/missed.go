package startuptaint

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Missed names the nodes that joined without admission's decision about
// their startup taint, sorted: nodes without api.StartupTaintAdmissionAnnotation
// created after the oldest node that carries it. That node dates when
// injection came into force, as far as the nodes still present show, so
// the nodes that were there before (the chart installed into a running
// cluster, an upgrade from a release without injection) are not named; a
// node created while injection was turned off is, as it did join without
// the taint. Nothing is named while no node carries the mark.
func Missed[T metav1.Object](nodes []T) []string {
	var since time.Time
	for _, n := range nodes {
		if _, ok := n.GetAnnotations()[api.StartupTaintAdmissionAnnotation]; ok {
			if c := n.GetCreationTimestamp().Time; since.IsZero() || c.Before(since) {
				since = c
			}
		}
	}
	if since.IsZero() {
		return nil
	}
	var missed []string
	for _, n := range nodes {
		if _, ok := n.GetAnnotations()[api.StartupTaintAdmissionAnnotation]; !ok && n.GetCreationTimestamp().After(since) {
			missed = append(missed, n.GetName())
		}
	}
	slices.Sort(missed)
	return missed
}
