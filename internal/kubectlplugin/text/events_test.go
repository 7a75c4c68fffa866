package text

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

func TestEventLines(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(minutesAgo int) time.Time { return now.Add(-time.Duration(minutesAgo) * time.Minute) }
	events := []eventsv1.Event{
		// A series: counted, last seen at its last observation.
		{Reason: api.EventRetaintSuppressed, Type: "Warning", ReportingController: "kube-node-ready-agent", Note: "budget\nexhausted",
			EventTime: metav1.NewMicroTime(at(30)), Series: &eventsv1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(at(1))}},
		{Reason: api.EventNodeVerified, Type: "Normal", ReportingController: "kube-node-ready-agent", EventTime: metav1.NewMicroTime(at(60))},
		// Written through core/v1 (kubelet): source component, old count.
		{Reason: "NodeReady", Type: "Normal", DeprecatedSource: corev1.EventSource{Component: "kubelet"},
			DeprecatedCount: 3, DeprecatedFirstTimestamp: metav1.NewTime(at(90)), DeprecatedLastTimestamp: metav1.NewTime(at(10))},
		// Nothing but its creation time.
		{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at(120))}, Reason: "Old", Type: "Normal"},
	}
	lines, total := EventLines(events, 0)
	if total != 4 || len(lines) != 4 {
		t.Fatalf("%d lines of %d, want 4 of 4", len(lines), total)
	}
	want := []struct {
		reason, from string
		count        int32
		seen         time.Time
	}{
		{"Old", "-", 1, at(120)},
		{api.EventNodeVerified, "kube-node-ready-agent", 1, at(60)},
		{"NodeReady", "kubelet", 3, at(10)},
		{api.EventRetaintSuppressed, "kube-node-ready-agent", 7, at(1)},
	}
	for i, w := range want {
		l := lines[i]
		if l.Reason != w.reason || l.From != w.from || l.Count != w.count || !l.LastSeen.Equal(w.seen) {
			t.Errorf("line %d = %+v, want %s from %s count %d seen %s (oldest first, newest last)", i, l, w.reason, w.from, w.count, w.seen)
		}
	}
	if lines[3].Note != "budget exhausted" {
		t.Errorf("note %q, want it on one line", lines[3].Note)
	}
	newest, total := EventLines(events, 2)
	if total != 4 || len(newest) != 2 || newest[0].Reason != "NodeReady" || newest[1].Reason != api.EventRetaintSuppressed {
		t.Errorf("limit 2: %+v of %d, want the 2 newest of 4", newest, total)
	}
}
