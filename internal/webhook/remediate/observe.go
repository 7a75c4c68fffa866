package remediate

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// sighting is when this controller first saw a node in one unverified state.
type sighting struct {
	state string    // taint and verified label, as judged
	at    time.Time // this replica's clock, with its monotonic reading
	// fresh: first seen with the startup taint and never verified, so a new
	// node; its outcome (verified, or overdue) feeds the circuit breaker.
	fresh bool
	// judged: already counted as a node that never verified.
	judged bool
}

// leaver is a node that left the unverified set (verified, or deleted).
type leaver struct {
	name  string
	uid   types.UID
	fresh bool
}

// observer dates nodes by what this controller saw, never by a clock it does
// not control: a condition's lastTransitionTime is the node's own clock, and
// creationTimestamp is the API server's (skewed against this replica's). A
// node's time starts when this replica first saw it unverified, and never
// before the replica's view of the cluster last became continuous (it began
// leading, or the API server answered again after an outage): a node gets a
// full deadline after either before it is judged.
//
// The informer's event handlers write; the scan reads.
type observer struct {
	mu sync.Mutex
	// state reads a node's unverified state (Controller.state).
	state func(*corev1.Node) (taint string, unverified bool)
	// startup are the startup taint keys; label and mark the verified label
	// and replacing annotation keys.
	startup     []string
	label, mark string

	seen    map[types.UID]sighting
	left    []leaver
	resumed time.Time // start of the current continuous view
	down    bool      // the last contact with the API server failed
	contact time.Time // last successful contact
}

func newObserver(c *Controller, now time.Time) *observer {
	return &observer{
		state: c.state, startup: c.cfg.StartupTaints, label: c.cfg.VerifiedLabel, mark: c.cfg.ReplacingAnnotation,
		seen: map[types.UID]sighting{}, resumed: now, contact: now,
	}
}

// stateKey names a node's unverified state; a new key is a new episode.
func (o *observer) stateKey(n *corev1.Node, taint string) string {
	return taint + "\x00" + n.Labels[o.label]
}

// observe records n as seen at now (an informer add or update, or a scan).
func (o *observer) observe(n *corev1.Node, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.observeLocked(n, now)
}

func (o *observer) observeLocked(n *corev1.Node, now time.Time) sighting {
	taint, unverified := o.state(n)
	if !unverified || n.DeletionTimestamp != nil {
		delete(o.seen, n.UID)
		return sighting{}
	}
	key := o.stateKey(n, taint)
	s, ok := o.seen[n.UID]
	if !ok || s.state != key {
		fresh := slices.Contains(o.startup, taint) && n.Labels[o.label] == "" && (!ok || s.fresh)
		s = sighting{state: key, at: now, fresh: fresh}
		o.seen[n.UID] = s
	}
	return s
}

// observeObj is observe for an informer notification.
func (o *observer) observeObj(obj any, now time.Time) {
	if n, ok := obj.(*corev1.Node); ok {
		o.observe(n, now)
	}
}

// leaveObj is leave for an informer delete notification (the node left the
// label selector, or is gone), tombstones included.
func (o *observer) leaveObj(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		o.leave(n)
	}
}

// leave records that n left the unverified set (an informer delete: the
// node verified, so no longer matches the selector, or is gone).
func (o *observer) leave(n *corev1.Node) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.seen[n.UID]
	delete(o.seen, n.UID)
	if _, marked := n.Annotations[o.mark]; ok || marked {
		o.left = append(o.left, leaver{name: n.Name, uid: n.UID, fresh: ok && s.fresh})
	}
}

// leavers hands over the nodes that left since the last call.
func (o *observer) leavers() []leaver {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.left
	o.left = nil
	return l
}

// since returns from when n counts as unverified, observing it now if this
// replica had not yet, and whether this scan judges it for the first time as
// a new node past the deadline (for the circuit breaker).
func (o *observer) since(n *corev1.Node, now time.Time, deadline time.Duration) (at time.Time, newlyFailed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.observeLocked(n, now)
	at = s.at
	if o.resumed.After(at) {
		at = o.resumed
	}
	if s.fresh && !s.judged && now.Sub(at) >= deadline {
		s.judged = true
		o.seen[n.UID] = s
		newlyFailed = true
	}
	return at, newlyFailed
}

// judge records n, seen now, as already judged a node that never verified
// (a new leader counted it from its age): this replica's own deadline for it
// does not count it again.
func (o *observer) judge(n *corev1.Node, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.observeLocked(n, now)
	if s.fresh {
		s.judged = true
		o.seen[n.UID] = s
	}
}

// restart gives every node a full deadline from now: a cluster-wide fault
// just ended, and the time it lasted was not the nodes' fault.
func (o *observer) restart(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.resumed = now
}

// contacted records a contact with the API server (ok: it answered). A
// contact after a failed one, or after a gap longer than maxGap (this
// replica stalled), restarts the view: every node gets a fair chance again.
// It reports whether it did.
func (o *observer) contacted(ok bool, now time.Time, maxGap time.Duration) (resumed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !ok {
		o.down = true
		return false
	}
	if o.down || now.Sub(o.contact) > maxGap {
		o.resumed, o.down, resumed = now, false, true
	}
	o.contact = now
	return resumed
}

// forget drops sightings of nodes not in live (gone without a delete
// notification, as after a relist).
func (o *observer) forget(live map[types.UID]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for uid := range o.seen {
		if !live[uid] {
			delete(o.seen, uid)
		}
	}
}
