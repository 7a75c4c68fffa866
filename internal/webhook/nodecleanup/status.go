package nodecleanup

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// StatusAnnotation shows on a node being cleaned up the attempt and each
// plugin's state (pending, running, done, skipped, failed: reason), so
// `kubectl describe node` shows where its cleanup stands.
const StatusAnnotation = api.CleanupStatusAnnotation

// statusDelay is how long a first cleanup attempt runs before its status is
// shown: a cleanup that finishes sooner (the common case, and every node of
// a mass scale-in whose plugins answer) writes nothing, since the node is
// gone right after; a slow or failing one is where people look.
var statusDelay = 2 * time.Second

// maxReason bounds one plugin's failure reason in the annotation.
const maxReason = 200

// cleanupStatus is the content of StatusAnnotation, with the plugins'
// order, which decides when a pending plugin starts running.
type cleanupStatus struct {
	api.CleanupStatus

	after map[string][]string
}

// newStatus is an attempt's status before any plugin has finished: the
// plugins that run after nothing are running, the others pending.
func newStatus(after map[string][]string, attempt int) *cleanupStatus {
	s := &cleanupStatus{CleanupStatus: api.CleanupStatus{Attempt: attempt, Plugins: make(map[string]string, len(after))}, after: after}
	for name := range after {
		s.Plugins[name] = string(api.PluginPending)
	}
	s.startReady()
	return s
}

// finish records a plugin's outcome and starts the plugins it held back.
func (s *cleanupStatus) finish(r cleanup.PluginResult) {
	s.Plugins[r.Name] = eventnote.Cut(pluginState(r).String(), maxReason)
	s.startReady()
}

// pluginState is what a plugin's outcome shows in the document. Every
// result cleanup counts as failed (PluginResult.Failed, unhealthy included)
// is failed there, with the error, or the result when there is none.
func pluginState(r cleanup.PluginResult) api.PluginState {
	var why string
	if r.Err != nil {
		why = r.Err.Error()
	}
	switch {
	case r.Result == cleanup.ResultSkipped:
		return api.PluginState{Phase: api.PluginSkipped, Reason: why}
	case r.Result == cleanup.ResultDryRun:
		return api.PluginState{Phase: api.PluginDryRun}
	case r.Failed() && why == "":
		return api.PluginState{Phase: api.PluginFailed, Reason: r.Result}
	case r.Failed():
		return api.PluginState{Phase: api.PluginFailed, Reason: why}
	}
	return api.PluginState{Phase: api.PluginDone}
}

// startReady marks pending plugins whose predecessors all finished as running.
func (s *cleanupStatus) startReady() {
	for name, deps := range s.after {
		if s.State(name).Phase != api.PluginPending {
			continue
		}
		if !slices.ContainsFunc(deps, func(d string) bool { return s.State(d).Unfinished() }) {
			s.Plugins[name] = string(api.PluginRunning)
		}
	}
}

// unfinished counts the plugins still pending or running.
func (s *cleanupStatus) unfinished() int {
	n := 0
	for name := range s.Plugins {
		if s.State(name).Unfinished() {
			n++
		}
	}
	return n
}

// statusWriter shows one attempt's status on the node: at once for a retry
// (the node is already held), after statusDelay for a first attempt still
// running, then at every step; always when the attempt fails.
type statusWriter struct {
	c    *Controller
	ctx  context.Context
	name string
	uid  types.UID

	mu      sync.Mutex
	s       *cleanupStatus
	on      bool
	stopped bool
	timer   clock.Timer
}

func (c *Controller) newStatusWriter(ctx context.Context, name string, uid types.UID, s *cleanupStatus) *statusWriter {
	w := &statusWriter{c: c, ctx: ctx, name: name, uid: uid, s: s}
	if s.Attempt > 1 {
		w.on = true
		c.writeStatus(ctx, name, uid, s, 0)
		return w
	}
	w.timer = c.clock.AfterFunc(statusDelay, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.stopped && w.s.unfinished() > 0 {
			w.on = true
			w.c.writeStatus(w.ctx, w.name, w.uid, w.s, 0)
		}
	})
	return w
}

// finish records a plugin's outcome, shown if the status is on and plugins are left.
func (w *statusWriter) finish(r cleanup.PluginResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.s.finish(r)
	if w.on && !w.stopped && w.s.unfinished() > 0 {
		w.c.writeStatus(w.ctx, w.name, w.uid, w.s, 0)
	}
}

// failed shows the failed attempt and when the next one comes.
func (w *statusWriter) failed(retry time.Duration) {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.c.writeStatus(w.ctx, w.name, w.uid, w.s, retry)
}

func (w *statusWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// writeStatus puts the status on the node (only the node of this UID). A
// failed write is logged at debug level only: the status is for people, and
// the cleanup does not depend on it.
func (c *Controller) writeStatus(ctx context.Context, name string, uid types.UID, s *cleanupStatus, retryIn time.Duration) {
	if retryIn > 0 {
		s.RetryIn = retryIn.String()
	}
	value, err := json.Marshal(s)
	if err != nil {
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         uid, // a precondition: never annotate a node re-created under the name
		"annotations": map[string]string{StatusAnnotation: string(value)},
	}})
	if err != nil {
		return
	}
	_, err = c.client.Resource(NodesResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerWebhook})
	c.statusWrites.Inc()
	if err != nil {
		c.log.Debug("cleanup status not written", "node", name, "error", err.Error())
	}
}
