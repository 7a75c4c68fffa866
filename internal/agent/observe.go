package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
)

// Observe mode (Config.Observe, --mode=observe) runs every check and writes
// the condition, the metrics and the Events as enforce does, but the agent
// never adds a taint and never keeps one of ours: a node is never held. What
// enforce would have done is recorded instead, so an operator can watch
// before enforcing:
//
//   - a new node (the webhook marked it api.StartupTaintObserved at
//     creation, or it carries our startup taint from a kubelet flag or a
//     NodePool) is judged by the bootstrap checks and gates until a round
//     passes; meanwhile its condition says WouldHold since its creation,
//     and the pass says for how long enforce would have held it;
//   - a node whose continuous checks fail --retaint-threshold rounds in a
//     row gets WouldRetaint (condition, Warning Event) and, when they pass
//     --recover-threshold rounds again, a Normal Event for how long enforce
//     would have kept it tainted;
//   - a taint of ours found on the node (a kubelet flag, the switch from
//     enforce) is removed at once, and the verified=false label with it, so
//     it holds no slot of the fleet budget.
//
// The would-be re-taint is not weighed against the fleet budget: no node is
// labelled verified=false in observe mode, so the budget has nothing to
// count. In a cluster-wide fault observe therefore records a re-taint on
// every failing node, where enforce would have stopped at the budget.

// would is what enforce would have on the node now.
type would struct {
	// state is "" (nothing), api.ReasonWouldHold (the startup taint) or
	// api.ReasonWouldRetaint (the unhealthy taint).
	state string
	// since is when enforce would have put that taint on: the node's
	// creation for the startup taint, the round that re-tainted it.
	since time.Time
	// started is set once the agent has looked at its node in observe mode.
	started bool
	// holding mirrors state == api.ReasonWouldHold for the node watch's
	// goroutine (bootstrapRound); the rest is the loop's alone.
	holding atomic.Bool
	// reboot is set while the hold enforce would have is after a reboot
	// (observereboot.go), not of a new node.
	reboot bool
}

// observeMetrics are observe mode's series.
type observeMetrics struct {
	mode    *prometheus.GaugeVec
	tainted prometheus.Gauge
	actions *prometheus.CounterVec
}

func newObserveMetrics(reg prometheus.Registerer) (*observeMetrics, error) {
	m := &observeMetrics{
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "node_ready_mode",
			Help: "The agent's --mode: 1 for the mode it runs in (enforce, observe or publish).",
		}, []string{"mode"}),
		tainted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_ready_would_be_tainted",
			Help: "Observe mode: 1 while enforce would have a taint of ours on the node (held new, or re-tainted); always 0 in enforce, where node_ready_verified says it.",
		}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_ready_would_taint_operations_total",
			Help: "Observe mode: the taint writes enforce would have made, by operation (add: re-taint, remove: untaint, hold: a new node held with the startup taint).",
		}, []string{"operation"}),
	}
	m.setMode(api.ModeEnforce)
	for _, op := range []string{"add", "remove", "hold"} {
		m.actions.WithLabelValues(op)
	}
	for _, c := range []prometheus.Collector{m.mode, m.tainted, m.actions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("agent: register metrics: %w", err)
		}
	}
	return m, nil
}

// setMode sets node_ready_mode.
func (m *observeMetrics) setMode(mode string) {
	for _, name := range []string{api.ModeEnforce, api.ModeObserve, api.ModePublish} {
		m.mode.WithLabelValues(name).Set(metricsserver.Bool(name == mode))
	}
}

// setWould records what enforce would have on the node now.
func (a *Agent) setWould(state string, since time.Time) {
	a.would.state, a.would.since, a.would.reboot = state, since, false
	a.would.holding.Store(state == api.ReasonWouldHold)
	a.metrics.observe.tainted.Set(metricsserver.Bool(state != ""))
}

// observeStart runs before each step's round in observe mode: on the first
// look at the node it notes whether enforce would hold it, and it removes
// any taint of ours the node carries (observe never holds a node). It
// reports whether the step may go on to its round.
func (a *Agent) observeStart(ctx context.Context, node *corev1.Node) bool {
	if !a.would.started {
		a.would.started = true
		if a.newNode(node) {
			a.setWould(api.ReasonWouldHold, node.CreationTimestamp.Time)
			a.metrics.observe.actions.WithLabelValues("hold").Inc()
			a.log.Info("observe mode: enforce would hold this new node with the startup taint until its checks pass",
				"taint", taintString(a.cfg.Taints.Startup))
		}
	}
	startup, retainted := NodeState(node, a.cfg.Taints, a.cfg.VerifiedLabel)
	if !startup && !retainted && !HasTaint(node.Spec.Taints, a.cfg.Taints.Startup) {
		a.observeReboot(node)
		return true
	}
	if retainted && a.would.state == "" {
		a.setWould(api.ReasonWouldRetaint, a.clock.Now())
	}
	a.log.Info("observe mode: removing taints of ours; enforce would keep them", "taints", node.Spec.Taints)
	if err := a.apply(ctx, Decide(State{Bypass: true}, a.cfg.Thresholds, a.cfg.Taints)); err != nil {
		a.log.Error("observe mode: cannot remove a taint of ours", "error", err)
		return false
	}
	return true
}

// newNode reports whether enforce would take node for a new one, held with
// the startup taint until verified: the webhook would have tainted it at
// creation, or it carries our startup taint, and it was never labelled.
func (a *Agent) newNode(node *corev1.Node) bool {
	if node.Labels[a.cfg.VerifiedLabel] != "" {
		return false
	}
	return node.Annotations[api.StartupTaintAdmissionAnnotation] == api.StartupTaintObserved || a.cfg.Taints.startupOn(node.Spec.Taints)
}

// actObserve is act in observe mode: Decide on the node as enforce would
// have it, record that, and write only the verified label ("true" once a
// round passes; never "false").
func (a *Agent) actObserve(ctx context.Context, round checks.Round, continuous bool, node *corev1.Node) error {
	want := Decide(State{
		Passed: round.Passed(), Failures: a.loop.failures, Passes: a.loop.passes,
		StartupTainted: a.would.state == api.ReasonWouldHold, Retainted: a.would.state == api.ReasonWouldRetaint,
		Continuous: continuous,
	}, a.cfg.Thresholds, a.cfg.Taints)
	var write Desired
	now := a.clock.Now()
	switch {
	case want.IsRetaint():
		a.setWould(api.ReasonWouldRetaint, now)
		a.metrics.observe.actions.WithLabelValues("add").Inc()
		a.log.Warn("observe mode: enforce would have re-tainted the node", "consecutive_failures", a.loop.failures,
			"taint", taintString(a.cfg.Taints.Unhealthy), "failing", round.Failed())
		a.event(node, corev1.EventTypeWarning, api.EventNodeWouldBeRetainted, "Observe",
			"observe mode: checks failed %d rounds in a row (%v); enforce would have applied taint %s (within the fleet budget)",
			a.cfg.Thresholds.Retaint, round.Failed(), taintString(a.cfg.Taints.Unhealthy))
	case want.Label == "true":
		if a.would.state != "" {
			held := now.Sub(a.would.since).Round(time.Second)
			a.metrics.observe.actions.WithLabelValues("remove").Inc()
			what := "startup taint " + taintString(a.cfg.Taints.Startup)
			if a.would.state == api.ReasonWouldRetaint {
				what = "taint " + taintString(a.cfg.Taints.Unhealthy)
			}
			a.log.Info("observe mode: enforce would remove its taint now", "taint", what, "held_seconds", held.Seconds())
			a.event(node, corev1.EventTypeNormal, api.EventNodeWouldBeUntainted, "Observe",
				"observe mode: checks pass; enforce would have held the node with %s for %s, until now", what, held)
			a.releasedAfterReboot(node)
			a.setWould("", time.Time{})
		}
		write = Desired{Label: "true"}
	}
	err := a.apply(ctx, write)
	a.setCondition(ctx, a.observedCondition(round))
	return err
}

// observedCondition is the condition in observe mode: the enforce one,
// unless enforce would have a taint on the node now.
func (a *Agent) observedCondition(round checks.Round) ConditionState {
	switch {
	case a.would.state == api.ReasonWouldHold:
		m := a.modes.message(a.wouldHoldSummary())
		m.Failing, m.Since = round.Failed(), a.would.since
		return ConditionState{Status: corev1.ConditionFalse, Reason: a.wouldHoldReason(), Message: m.String()}
	case a.would.state == api.ReasonWouldRetaint:
		m := a.modes.message("observe mode: enforce would have re-tainted this node with " + taintString(a.cfg.Taints.Unhealthy))
		m.Since = a.would.since // when it would have been re-tainted
		if round.Passed() {
			m.Passed, m.Needed = a.loop.passes, a.cfg.Thresholds.Recover
		} else {
			m.Failing = round.Failed()
		}
		return ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonWouldRetaint, Message: m.String()}
	case !round.Passed():
		return FailingCondition(round.Failed(), a.loop.failingSince, a.modes)
	default:
		return PassingCondition(a.modes)
	}
}
