package checks

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Gate is a check that waits for the node's surroundings rather than
// testing its health: the pods of the DaemonSets that will run there, the
// node's conditions. A gate is enabled by its own flags rather than
// --checks, is a bootstrap check unless --continuous-checks names it, and
// reads the node the agent's loop watches, so the loop drives it beyond
// running it in rounds.
type Gate interface {
	Check
	// Attach connects the gate to the loop it runs in; the loop calls it
	// once, before anything else.
	Attach(h GateHost)
	// Start runs what the gate watches, unless it runs already, until Stop
	// or the end of ctx, and waits at most wait for its first lists: a
	// round before them would fail the gate and cost a new node a backoff
	// step.
	Start(ctx context.Context, wait time.Duration)
	// Stop ends the gate's watches and drops their caches, so a node in
	// service pays nothing for a bootstrap gate.
	Stop()
	// Changed reports whether a change of the node from old to new may
	// change the gate's answer: the loop then runs a round at once.
	Changed(old, new *corev1.Node) bool
}

// GateHost is what a gate needs from the agent's loop.
type GateHost interface {
	// Node returns the node as the loop last saw it; nil before it did.
	Node() *corev1.Node
	// Verifying reports whether the node is being verified (its bootstrap
	// checks have not passed yet): only then is a gate's news worth a
	// round at once.
	Verifying() bool
	// Wake asks for a round now: a gate's wait has ended.
	Wake()
	// DaemonSetTimedOut reports a DaemonSet the gate gave up waiting for
	// after waited (its limit is timeout): counted, logged and recorded as
	// an Event on the node.
	DaemonSetTimedOut(daemonSet string, waited, timeout time.Duration)
}
