package agent

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// next is the delay after a round: the start-up backoff while the node is
// verified for the first time (until the first pass, or until its tries run
// out), then the jittered period.
//
// The start-up backoff is only for a node that carries the startup taint. A
// node that is verified, re-tainted, or carries no taint of ours (the chart
// installed into a running cluster) is judged on periodic rounds only,
// whatever the process's age: an agent restarted by a rolling update, an OOM
// kill or a reboot while DNS or a peer is briefly down must not count its
// failed rounds seconds apart and re-taint a node in service long before
// --retaint-threshold periods.
func (a *Agent) next(ctx context.Context, round checks.Round, inInitial *bool, initial backoff.BackOff) time.Duration {
	switch {
	case !*inInitial || !a.startingUp():
		return a.jittered()
	case round.Passed():
		*inInitial = false
		return a.jittered()
	}
	d := initial.NextBackOff()
	if d == backoff.Stop {
		*inInitial = false
		a.metrics.initialExhausted.Inc()
		if node := a.cachedNode(); node != nil {
			a.event(node, corev1.EventTypeWarning, ReasonVerificationFailed, "Verify",
				"checks still failing after %d start-up tries, node stays tainted and is retried every %s",
				a.opts.InitialTries, a.opts.Period)
		}
		a.log.Warn("start-up retries exhausted; retrying every period", "period_seconds", a.opts.Period.Seconds(), "error", round.Summary())
		return a.jittered()
	}
	return d
}

// startingUp reports whether the node, as last seen, is being verified for
// the first time: it carries the startup taint and was never re-tainted.
func (a *Agent) startingUp() bool {
	node := a.cachedNode()
	if node == nil {
		return false
	}
	startupTainted, _ := NodeState(node, a.taints, a.opts.VerifiedLabel)
	return startupTainted
}

// jittered is the period spread by ±Jitter, so agents started together do
// not query DNS and the API server in lockstep.
func (a *Agent) jittered() time.Duration {
	j := a.opts.Jitter * (2*rand.Float64() - 1)
	return time.Duration(float64(a.opts.Period) * (1 + j))
}

// newInitialBackoff is the start-up backoff: first, doubling, tries times.
func newInitialBackoff(first time.Duration, tries int) backoff.BackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval: first, Multiplier: 2, RandomizationFactor: 0,
		MaxInterval: first << 20, Stop: backoff.Stop, Clock: backoff.SystemClock,
	}
	r := backoff.WithMaxRetries(b, uint64(tries))
	r.Reset()
	return r
}
