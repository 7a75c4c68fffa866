package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Round accounting: which checks a round runs, which rounds count toward a
// re-taint, and when the next round runs. A failed round counts toward a
// re-taint only when it ran the continuous checks alone (the bootstrap
// set's failures hold the startup taint and nothing else), when the node
// could have acted on it (not during a control-plane fault) and when it is
// a periodic round (not one a change of the node woke). The start-up
// backoff paces only a node being verified for the first time.

// bootstrapRound reports whether a round on node runs every check and gate
// (BootstrapRound): only while it is being verified for the first time.
func (a *Agent) bootstrapRound(node *corev1.Node) bool {
	if a.cfg.Observe {
		// The node carries no taint of ours: enforce would hold it, or not.
		return a.would.holding.Load()
	}
	if a.cfg.Publish {
		// No taint of ours: the label says whether the node verified once.
		verifying, _ := a.publishNodeState(node)
		return verifying
	}
	return BootstrapRound(node, a.cfg.Taints, a.cfg.VerifiedLabel, a.periodic == nil)
}

// countOn starts the streaks again when runner is not the one whose rounds
// they count: a streak never mixes the bootstrap set with the continuous
// checks, whatever happened to the node between two rounds (the startup
// taint removed by hand while the gates failed, say).
func (a *Agent) countOn(runner *checks.Runner) {
	if a.loop.streakOf != nil && a.loop.streakOf != runner {
		a.loop.failures, a.loop.passes = 0, 0
		a.metrics.failures.Set(0)
	}
	a.loop.streakOf = runner
}

// controlPlaneFault returns why a failed round says nothing about the node,
// or nil, and whether the API server gave no answer at all (see skip): a
// check that failed because the API server refused or could not serve (5xx,
// 429), an API server that is not ready, or one that answers /readyz but
// not the api check's read of the node in time. /readyz is exempt from the
// API server's flow control, the agents' reads are not: an overloaded server
// queues them until the check's timeout (its 429 comes after the agent gave
// up). The agent could not have acted on such a round anyway, and an outage
// or overload of the control plane is not the node's failure.
func (a *Agent) controlPlaneFault(ctx context.Context, round checks.Round) (fault error, silent bool) {
	for _, r := range round.Results {
		if r.Err != nil && serverFault(r.Err) {
			return fmt.Errorf("the API server could not serve check %s: %w", r.Name, r.Err), false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CheckTimeout)
	defer cancel()
	if err := a.server.Readyz(ctx); err != nil {
		return fmt.Errorf("the API server is not ready: %w", err), unanswered(err)
	}
	for _, r := range round.Results {
		if r.Name == "api" && unanswered(r.Err) {
			return fmt.Errorf("the API server answers /readyz but not the api check's read (overloaded, or queueing this agent's requests): %w", r.Err), false
		}
	}
	return nil, false
}

// serverFault reports whether err is the API server failing to serve, as
// opposed to answering: overloaded, starting, or timing out on its side.
func serverFault(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsUnexpectedServerError(err)
}

// unanswered reports whether err is a request the API server gave no
// answer to (a dial or a read that failed or timed out), as opposed to an
// HTTP status.
func unanswered(err error) bool {
	var status apierrors.APIStatus
	return err != nil && !errors.As(err, &status)
}

// skip handles a failed round that does not count: the streaks start again
// from zero, so after the outage the node needs the full threshold of
// rounds the agent could act on. When the API server gave no answer even to
// /readyz (silent), the connections to it that its host stopped
// acknowledging are dropped: one that lost packets in a partition may stay
// silent long after the partition heals, and the next round should dial
// anew instead of waiting on it. Live connections stay, as they do when the
// server answers /readyz: an overloaded server is slow on all of them, and
// new handshakes and watches from every agent would only add to its load.
func (a *Agent) skip(round checks.Round, fault error, silent bool) {
	if silent {
		if n := a.server.DropStalledConnections(); n > 0 {
			a.log.Info("dropped connections to the API server that it stopped acknowledging; the next request dials anew", "connections", n)
		}
	}
	a.loop.failures, a.loop.passes = 0, 0
	a.metrics.failures.Set(0)
	a.metrics.skippedRounds.Inc()
	a.health.set(true, false)
	if !a.loop.faultLogged {
		a.loop.faultLogged = true
		a.log.Warn("control-plane fault: failed rounds do not count toward re-tainting until it answers",
			"fault", fault.Error(), "failed", round.Failed())
	}
}

// uncounted handles a failed round that a change of the node (a wait-for
// taint removed, the bypass annotation removed, a gate's condition) woke on
// a node that is not starting up. Such a round runs at once, so its
// failure is no periodic round: counted, a few changes of the node could
// re-taint it in seconds, long before --retaint-threshold periods. It
// breaks the pass streak but adds nothing to the failure streak, and the
// next periodic round stays when it was due, so changes coming faster than
// the period cannot put off the rounds that count either.
func (a *Agent) uncounted(round checks.Round) time.Duration {
	a.loop.passes = 0
	a.health.set(true, apiAnswered(round))
	a.log.Info("round woken by a change of the node failed; not counted: only periodic rounds count toward the re-taint",
		"failed", round.Failed(), "consecutive_failures", a.loop.failures, "error", round.Summary())
	return max(a.loop.due.Sub(a.clock.Now()), 0)
}

// observe records a round's outcome in state, metrics, readiness and logs.
func (a *Agent) observe(round checks.Round) {
	a.health.set(true, apiAnswered(round))
	if round.Passed() {
		a.loop.blockedLogged = ""
		if a.loop.failures > 0 {
			a.log.Info("checks pass again", "after_failures", a.loop.failures)
		}
		a.loop.failures = 0
		a.loop.passes++
	} else {
		if a.loop.failures == 0 {
			a.loop.failingSince = a.clock.Now()
		}
		a.loop.failures++
		a.loop.passes = 0
		a.log.Warn("verification round failed", "failed", round.Failed(), "consecutive_failures", a.loop.failures,
			"duration_seconds", round.Duration.Seconds(), "error", round.Summary())
	}
	a.metrics.failures.Set(float64(a.loop.failures))
	a.log.Debug("verification round", "passed", round.Passed(), "duration_seconds", round.Duration.Seconds())
}

// apiAnswered reports whether round's api check (if it ran) passed: the
// readiness of the agent.
func apiAnswered(round checks.Round) bool {
	for _, r := range round.Results {
		if r.Name == "api" {
			return r.Err == nil
		}
	}
	return true
}

// next is the delay after a round: the start-up backoff while the node is
// verified for the first time (until the first pass, or until its tries run
// out), --recover-interval while a re-tainted node's recovery is being
// confirmed, then the jittered period.
//
// The start-up backoff is only for a node that carries the startup taint. A
// node that is verified, re-tainted, or carries no taint of ours (the chart
// installed into a running cluster) is judged on periodic rounds only,
// whatever the process's age: an agent restarted by a rolling update, an OOM
// kill or a reboot while DNS or a peer is briefly down must not count its
// failed rounds seconds apart and re-taint a node in service long before
// --retaint-threshold periods.
func (a *Agent) next(round checks.Round) time.Duration {
	if a.confirming(round) {
		return min(a.cfg.RecoverInterval, a.cfg.Period)
	}
	switch {
	case a.loop.startupOver || !a.startingUp():
		return a.jittered()
	case round.Passed():
		a.loop.startupOver = true
		return a.jittered()
	}
	d := a.loop.startup.NextBackOff()
	if d == backoff.Stop {
		a.loop.startupOver = true
		a.metrics.initialExhausted.Inc()
		if node := a.view.node(); node != nil {
			a.event(node, corev1.EventTypeWarning, api.EventNodeVerificationFailed, "Verify",
				"checks still failing after %d start-up tries, node stays tainted and is retried every %s",
				a.cfg.InitialTries, a.cfg.Period)
		}
		a.log.Warn("start-up retries exhausted; retrying every period", "period_seconds", a.cfg.Period.Seconds(), "error", round.Summary())
		return a.jittered()
	}
	return d
}

// confirming reports whether round passed on a re-tainted node that needs
// more passed rounds before its untaint: the rounds that confirm a recovery
// run --recover-interval apart, so a node that is well again is back in
// service within about a period instead of --recover-threshold periods.
// Only passes are hurried; failed rounds keep the period, so the time to a
// re-taint, and the load of an outage on the API server, stay as they were.
func (a *Agent) confirming(round checks.Round) bool {
	if a.cfg.RecoverInterval <= 0 || !round.Passed() || a.loop.passes == 0 || a.loop.passes >= a.cfg.Thresholds.Recover {
		return false
	}
	node := a.view.node()
	if node == nil {
		return false
	}
	_, retainted := a.nodeState(node)
	return retainted
}

// startingUp reports whether the node, as last seen, is being verified for
// the first time: it carries the startup taint and was never re-tainted.
func (a *Agent) startingUp() bool {
	node := a.view.node()
	if node == nil {
		return false
	}
	startupTainted, _ := a.nodeState(node)
	return startupTainted
}

// jittered is the period spread by ±Jitter, so agents started together do
// not query DNS and the API server in lockstep.
func (a *Agent) jittered() time.Duration {
	j := a.cfg.Jitter * (2*rand.Float64() - 1)
	return time.Duration(float64(a.cfg.Period) * (1 + j))
}

// newInitialBackoff is the start-up backoff: first, doubling, tries times.
func newInitialBackoff(first time.Duration, tries int, clk backoff.Clock) backoff.BackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval: first, Multiplier: 2, RandomizationFactor: 0,
		MaxInterval: first << 20, Stop: backoff.Stop, Clock: clk,
	}
	r := backoff.WithMaxRetries(b, uint64(tries))
	r.Reset()
	return r
}
