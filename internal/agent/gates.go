package agent

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// gateHost is what the agent's gates see of it (checks.GateHost): its node
// view, its loop's wake-up, and its metrics, log and Events.
type gateHost struct{ a *Agent }

// Node implements checks.GateHost.
func (h gateHost) Node() *corev1.Node { return h.a.view.node() }

// Verifying implements checks.GateHost.
func (h gateHost) Verifying() bool {
	node := h.a.view.node()
	return node != nil && h.a.bootstrapRound(node)
}

// Wake implements checks.GateHost.
func (h gateHost) Wake() { h.a.signal() }

// DaemonSetTimedOut implements checks.GateHost.
func (h gateHost) DaemonSetTimedOut(ds string, waited, timeout time.Duration) {
	a := h.a
	a.metrics.gateTimeouts.Inc()
	a.log.Warn("gate gave up waiting for a DaemonSet; no longer waited for", "daemonset", ds, "waited_seconds", waited.Seconds())
	if node := a.view.node(); node != nil {
		a.event(node, corev1.EventTypeWarning, api.EventDaemonSetGateTimeout, "Verify",
			"DaemonSet %s not Ready on this node after %s; no longer waited for", ds, timeout)
	}
}

// signal asks the loop for a round now, or right after the one it is running.
func (a *Agent) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
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
