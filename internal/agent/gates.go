package agent

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The agent is its gates' host (checks.GateHost): they read its node view,
// wake its loop and report through it.

// Node implements checks.GateHost.
func (a *Agent) Node() *corev1.Node { return a.view.node() }

// Verifying implements checks.GateHost.
func (a *Agent) Verifying() bool {
	node := a.view.node()
	return node != nil && !a.bootstrapped(node)
}

// Wake implements checks.GateHost: the loop runs a round now, or right
// after the one it is running.
func (a *Agent) Wake() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// DaemonSetTimedOut implements checks.GateHost.
func (a *Agent) DaemonSetTimedOut(ds string, waited, timeout time.Duration) {
	a.metrics.gateTimeouts.Inc()
	a.log.Warn("gate gave up waiting for a DaemonSet; no longer waited for", "daemonset", ds, "waited_seconds", waited.Seconds())
	if node := a.view.node(); node != nil {
		a.event(node, corev1.EventTypeWarning, ReasonGateTimeout, "Verify",
			"DaemonSet %s not Ready on this node after %s; no longer waited for", ds, timeout)
	}
}

// runGates runs each gate's watches while it has work (the node is being
// verified, or the gate is continuous) and stops them otherwise, so a node
// in service pays nothing for a bootstrap gate.
func (a *Agent) runGates(ctx context.Context, verifying bool) {
	for _, g := range a.gates {
		if verifying || a.continuous(g.Name()) {
			g.Start(ctx, a.cfg.CheckTimeout)
		} else {
			g.Stop()
		}
	}
}
