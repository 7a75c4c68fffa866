package text

import (
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
)

// EventLine is one Event about a node as `why` shows it.
type EventLine struct {
	// LastSeen is the latest occurrence.
	LastSeen time.Time
	// Type is Normal or Warning.
	Type string
	// Reason is the Event's reason, such as NodeRetainted.
	Reason string
	// From is the reporting controller (or the old API's source component).
	From string
	// Count is how many occurrences the Event stands for: its series count.
	Count int32
	// Note is the Event's note on one line.
	Note string
}

// EventLines turns Events into lines, oldest first and newest last, keeping
// the newest limit of them (all when limit <= 0); it also returns how many
// there were.
func EventLines(events []eventsv1.Event, limit int) ([]EventLine, int) {
	lines := make([]EventLine, 0, len(events))
	for i := range events {
		lines = append(lines, Line(&events[i]))
	}
	slices.SortStableFunc(lines, func(a, b EventLine) int { return a.LastSeen.Compare(b.LastSeen) })
	total := len(lines)
	if limit > 0 && total > limit {
		lines = lines[total-limit:]
	}
	return lines, total
}

// Line is e as a line.
func Line(e *eventsv1.Event) EventLine {
	l := EventLine{Type: e.Type, Reason: e.Reason, From: e.ReportingController, Count: 1,
		Note: strings.Join(strings.Fields(e.Note), " ")}
	if l.From == "" {
		l.From = e.DeprecatedSource.Component
	}
	if l.From == "" {
		l.From = "-"
	}
	switch {
	case e.Series != nil:
		l.Count, l.LastSeen = e.Series.Count, e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		l.LastSeen = e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		l.LastSeen = e.DeprecatedLastTimestamp.Time
	default:
		l.LastSeen = e.CreationTimestamp.Time
	}
	// Events written through the old core/v1 API count repeats there.
	if e.Series == nil && e.DeprecatedCount > 1 {
		l.Count = e.DeprecatedCount
		if !e.DeprecatedLastTimestamp.IsZero() {
			l.LastSeen = e.DeprecatedLastTimestamp.Time
		}
	}
	return l
}
