package remediate

import (
	"context"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// Switch is the operator's suspend switch (suspend.Switch): the watch's
// copy for planning, a fresh read right before a delete.
type Switch interface {
	State() suspend.State
	Read(ctx context.Context) (suspend.State, error)
}

// Blocked reasons of the suspend switch.
const (
	// blockedSuspended: the operator's suspend switch is on.
	blockedSuspended = "suspended"
	// blockedSuspendUnreadable: the switch cannot be read, so whether it
	// is on is unknown: nothing is deleted.
	blockedSuspendUnreadable = "suspend_unreadable"
)

// suspendBlocked is the blocked reason st gives, or "".
func suspendBlocked(st suspend.State) string {
	switch {
	case !st.Known:
		return blockedSuspendUnreadable
	case st.On:
		return blockedSuspended
	}
	return ""
}

// switchState is the switch as the watch last saw it; none is off.
func (c *Controller) switchState() suspend.State {
	if c.cfg.Suspend == nil {
		return suspend.State{Known: true}
	}
	return c.cfg.Suspend.State()
}

// switchRead reads the switch fresh; a failed read holds (its state is unknown).
func (c *Controller) switchRead(ctx context.Context) suspend.State {
	if c.cfg.Suspend == nil {
		return suspend.State{Known: true}
	}
	st, _ := c.cfg.Suspend.Read(ctx)
	return st
}

// suspendEpisode restarts every node's time when the switch lets
// replacements go again: a suspend is an incident, and the nodes it left
// past the deadline get a full deadline from now rather than being
// replaced the moment it ends.
func (c *Controller) suspendEpisode(st suspend.State, now time.Time) {
	if c.suspended != "" && !st.Holds() {
		c.obs.restart(now)
		c.log.Warn("the suspend switch lets replacements go again; every unverified node gets a full deadline from now",
			"unverified_deadline", c.cfg.Deadline)
	}
	c.suspend, c.suspended = st, suspendBlocked(st)
}
