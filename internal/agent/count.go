package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// Which rounds count toward a re-taint: a failed round counts only when
// the node could have acted on it (not during a control-plane fault) and
// when it is a periodic round (not one a change of the node woke).

// controlPlaneFault returns why a failed round says nothing about the node,
// or nil: a check that failed because the API server refused or could not
// serve (5xx, 429), or an API server that is not ready. The agent could not
// have acted on such a round anyway, and an outage of the control plane is
// not the node's failure.
func (a *Agent) controlPlaneFault(ctx context.Context, round checks.Round) error {
	for _, r := range round.Results {
		if r.Err != nil && serverFault(r.Err) {
			return fmt.Errorf("the API server could not serve check %s: %w", r.Name, r.Err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.CheckTimeout)
	defer cancel()
	if err := a.client.Readyz(ctx); err != nil {
		return fmt.Errorf("the API server is not ready: %w", err)
	}
	return nil
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
// rounds the agent could act on. When the API server gave no answer, the
// connections to it are dropped: one that lost packets in a partition may
// stay silent long after the partition heals, and the next round should
// dial anew instead of waiting on it.
func (a *Agent) skip(round checks.Round, fault error) {
	if closer, ok := a.client.(ConnectionCloser); ok && unanswered(fault) {
		closer.CloseConnections()
	}
	a.failures, a.passes = 0, 0
	a.metrics.failures.Set(0)
	a.metrics.skippedRounds.Inc()
	a.setReady(true, false)
	if !a.faultLogged {
		a.faultLogged = true
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
	a.passes = 0
	a.setReady(true, apiAnswered(round))
	a.log.Info("round woken by a change of the node failed; not counted: only periodic rounds count toward the re-taint",
		"failed", round.Failed(), "consecutive_failures", a.failures, "error", round.Summary())
	return max(time.Until(a.due), 0)
}

// observe records a round's outcome in state, metrics, readiness and logs.
func (a *Agent) observe(round checks.Round) {
	a.setReady(true, apiAnswered(round))
	if round.Passed() {
		a.blockedLogged = ""
		if a.failures > 0 {
			a.log.Info("checks pass again", "after_failures", a.failures)
		}
		a.failures = 0
		a.passes++
	} else {
		if a.failures == 0 {
			a.failingSince = time.Now()
		}
		a.failures++
		a.passes = 0
		a.log.Warn("verification round failed", "failed", round.Failed(), "consecutive_failures", a.failures,
			"duration_seconds", round.Duration.Seconds(), "error", round.Summary())
	}
	a.metrics.failures.Set(float64(a.failures))
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
