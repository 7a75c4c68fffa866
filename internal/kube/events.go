package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Recorder writes events.k8s.io/v1 Events about Nodes. It replaces the
// client-go events broadcaster (which pulls in the whole clientset): writes
// are asynchronous and bounded in time, and the same reason and note on the
// same object is recorded at most once per Dedup window, so a condition that
// persists across rounds does not flood the API server.
type Recorder struct {
	// Client writes the Events.
	Client *Client
	// Controller is the reportingController, such as kube-node-ready-agent.
	Controller string
	// Instance is the reportingInstance, such as the node name.
	Instance string
	// Dedup is the window in which a repeated Event is dropped.
	Dedup time.Duration
	// Log receives write failures.
	Log *slog.Logger

	mu   sync.Mutex
	last map[string]time.Time
}

// maxNote is the API server's limit on Event notes.
const maxNote = 1024

// Eventf records an Event regarding ref (a cluster-scoped object's Events
// live in the default namespace, as client-go's recorder puts them).
func (r *Recorder) Eventf(ref corev1.ObjectReference, eventType, reason, action, format string, args ...any) {
	note := fmt.Sprintf(format, args...)
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	key := ref.Name + "/" + reason + "/" + note
	now := time.Now()
	r.mu.Lock()
	if r.last == nil {
		r.last = make(map[string]time.Time)
	}
	if t, ok := r.last[key]; ok && now.Sub(t) < r.Dedup {
		r.mu.Unlock()
		return
	}
	r.last[key] = now
	for k, t := range r.last {
		if now.Sub(t) >= r.Dedup {
			delete(r.last, k)
		}
	}
	r.mu.Unlock()

	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		// Named as client-go's recorder names them: object name and a hex timestamp.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.Controller,
		ReportingInstance:   r.Instance,
		Action:              action,
		Reason:              reason,
		Regarding:           ref,
		Note:                note,
		Type:                eventType,
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Client.CreateEvent(ctx, ev); err != nil && r.Log != nil {
			r.Log.Warn("record event failed", "reason", reason, "err", err)
		}
	}()
}
