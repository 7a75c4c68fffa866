package harness

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Events lists the events.k8s.io/v1 Events about the object of kind
// ("Node", "Pod") and name, in every namespace (Events about Nodes live in
// "default", about a Pod in its namespace), as the API server returns them.
// A failed list fails tb.
func (cp *ControlPlane) Events(tb testing.TB, kind, name string) []eventsv1.Event {
	tb.Helper()
	list, err := cp.Client.EventsV1().Events(metav1.NamespaceAll).List(tb.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"regarding.kind": kind, "regarding.name": name}.String(),
	})
	if err != nil {
		tb.Fatalf("list Events about %s %s: %v", kind, name, err)
	}
	return list.Items
}

// EventNotes are the notes of the Events about kind/name with reason.
func (cp *ControlPlane) EventNotes(tb testing.TB, kind, name, reason string) []string {
	tb.Helper()
	var notes []string
	for _, ev := range cp.Events(tb, kind, name) {
		if ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// WaitEvent waits until an Event about kind/name with reason whose note
// contains note ("" for any) exists; past timeout it fails tb with the
// Events there are.
func (cp *ControlPlane) WaitEvent(tb testing.TB, timeout time.Duration, kind, name, reason, note string) {
	tb.Helper()
	what := fmt.Sprintf("an Event %s about %s %s saying %q", reason, kind, name, note)
	Eventually(tb, timeout, what, func() (bool, string) {
		evs := cp.Events(tb, kind, name)
		seen := make([]string, 0, len(evs))
		for _, ev := range evs {
			seen = append(seen, ev.Reason+": "+ev.Note)
		}
		found := slices.ContainsFunc(evs, func(ev eventsv1.Event) bool {
			return ev.Reason == reason && strings.Contains(ev.Note, note)
		})
		return found, fmt.Sprintf("Events: %q", seen)
	})
}
