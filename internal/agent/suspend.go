package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// Why a re-taint waits for the operator's suspend switch (kubectl node-ready
// suspend): the reason label of node_ready_retaint_deferred_total.
const (
	// DeferSuspended: the switch is on.
	DeferSuspended = "suspended"
	// DeferSuspendUnreadable: the switch cannot be read, so whether it is
	// on is unknown: not tainting is the safe side.
	DeferSuspendUnreadable = "suspend_unreadable"
)

// SuspendSwitch is the operator's suspend switch as the agent reads it
// (suspend.Switch): the watch's copy, and a fresh read.
type SuspendSwitch interface {
	State() suspend.State
	Read(ctx context.Context) (suspend.State, error)
}

// suspendState is the switch as the watch last saw it; no switch (tests,
// a Config without one) is off.
func (a *Agent) suspendState() suspend.State {
	if a.cfg.Suspend == nil {
		return suspend.State{Known: true}
	}
	return a.cfg.Suspend.State()
}

// suspendRead reads the switch fresh, right before a taint is written.
func (a *Agent) suspendRead(ctx context.Context) suspend.State {
	if a.cfg.Suspend == nil {
		return suspend.State{Known: true}
	}
	st, _ := a.cfg.Suspend.Read(ctx)
	return st
}

// suspended reports whether st holds the re-taint of node, and if so says
// so: counted every round, logged and recorded as an Event once per
// episode (again only when the switch's reason changes).
func (a *Agent) suspended(node *corev1.Node, st suspend.State, cause string) bool {
	if !st.Holds() {
		return false
	}
	reason := DeferSuspended
	if !st.Known {
		reason = DeferSuspendUnreadable
	}
	a.metrics.retaintDeferred.WithLabelValues(reason).Inc()
	key := reason + "/" + st.Reason + "/" + st.Since
	if a.loop.blockedLogged == key {
		return true
	}
	a.logBlocked(key, "re-taint held: "+st.Why(), "consecutive_failures", a.loop.failures)
	a.event(node, corev1.EventTypeWarning, api.EventRetaintSuspended, "Retaint",
		"%s, but no node is re-tainted while %s; untaints go on (kubectl node-ready resume ends it)", cause, st.Why())
	return true
}
