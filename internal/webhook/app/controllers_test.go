package app

import (
	"slices"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// The node watcher's cache keeps the admission mark that the missed-node
// reporter reads from it while startup taint injection is on, and nothing
// for it otherwise (issue 35, R12).
func TestNodeCacheKeepsWhatTheMissedReporterReads(t *testing.T) {
	opts := NewOptions()
	opts.InjectStartupTaint = true
	if got := keptAnnotations(*opts); !slices.Contains(got, api.StartupTaintAdmissionAnnotation) {
		t.Errorf("injection on: kept annotations %v, want %s among them", got, api.StartupTaintAdmissionAnnotation)
	}
	opts.InjectStartupTaint = false
	if got := keptAnnotations(*opts); len(got) != 0 {
		t.Errorf("injection off: kept annotations %v, want none", got)
	}
}
