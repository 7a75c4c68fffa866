// Package agent is the node-local verifier's loop: it runs the checks on
// its own node, removes the startup taint when they pass, and re-taints the
// node when they keep failing, within a cluster-wide budget.
//
// The loop (this file) reads its node through a view with freshness rules
// (nodeview.go), counts rounds (rounds.go: the start-up backoff, the
// streaks, control-plane faults), writes the node through a guarded writer
// (write.go) and re-taints only within the fleet budget (fleet.go, under
// the Lease of lease.go). The decisions are pure (taint.go, condition.go).
package agent

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
)

// Agent verifies one node. Create it with New and call Run.
//
// Its fields are set by New and only read afterwards, except three: view
// and health, which lock themselves (the watch's and the metrics server's
// goroutines use them), and loop, which only the goroutine running Run
// touches.
type Agent struct {
	cfg Config
	// nodes counts the fleet (fleet.go); view reads and writes the agent's
	// own node, the lock the re-taint Lease.
	nodes  corev1client.NodeInterface
	server Server
	// clock is cfg.Clock, or the real clock.
	clock    clock.WithTicker
	log      *slog.Logger
	metrics  *Metrics
	recorder Recorder
	// runner runs every enabled check: the bootstrap set, the rounds until
	// the first untaint of a node that carries the startup taint.
	runner *checks.Runner
	// periodic runs the continuous checks on a node in service (verified,
	// re-tainted, or without any taint or label of ours); nil when there
	// are none (bootstrap-only: no rounds after verification).
	periodic *checks.Runner
	// modes names the continuous and bootstrap checks in the condition.
	modes CheckModes
	// gates are the enabled gates, driven by the loop beyond their rounds.
	gates []checks.Gate
	// idleStop are the checks' watches a bootstrap-only agent stops when it
	// goes idle; nil when there are none.
	idleStop Stopper
	lock     *retaintLock
	// wake is signalled when the node changes in a way that should not wait for the next round.
	wake chan struct{}
	// idle is set while a bootstrap-only agent has nothing to do but watch
	// its node; the startup taint coming back then wakes it.
	idle atomic.Bool

	view   *nodeView
	health health
	loop   loop
	// would is what enforce would have on the node now (observe mode).
	would would
}

// loop is the state of the Run loop; only the goroutine running Run reads
// or writes it.
type loop struct {
	// woken is set while a step runs because the node's watch woke the
	// loop, not the timer; due is when the next periodic round is due.
	woken bool
	due   time.Time
	// startup is the start-up backoff; startupOver is set once it no longer
	// paces rounds (a round passed, or its tries ran out).
	startup     backoff.BackOff
	startupOver bool
	// writeRetry spaces the rounds after a failed write to the node, so a
	// passed round is not left waiting a whole period for its untaint.
	writeRetry backoff.BackOff
	// failures and passes are the current streaks of rounds that count;
	// failingSince is when the failure streak began.
	failures     int
	passes       int
	failingSince time.Time
	// streakOf is the runner whose rounds the streaks count (nil before the
	// first): a round of the other set starts them again, so a failure
	// streak long enough to re-taint holds rounds of the continuous checks
	// only, never failures of the bootstrap set.
	streakOf     *checks.Runner
	everVerified bool
	// boot is the boot ID the node was verified under, once known
	// (reboot.go verifiedBoot); recorded in the condition.
	boot string
	// Each is set while its episode lasts, so that is logged once:
	// faultLogged a control-plane fault, condErr a failing condition write,
	// noNodeLogged a node missing from the watch, blockedLogged why a
	// wanted re-taint is blocked, waitingFor the wait-for taint present.
	faultLogged   bool
	condErr       bool
	noNodeLogged  bool
	blockedLogged string
	waitingFor    string
}

// Stopper is what the checks read through that a bootstrap-only agent
// stops once it goes idle (endpoints.PeerSlices: the EndpointSlice watches);
// it must start again on the checks' next read.
type Stopper interface{ Stop() }

// New wires an agent from its configuration and the enabled checks, gates
// among them; the gates are attached to the agent's loop. idleStop (may be
// nil) is stopped whenever a bootstrap-only agent goes idle.
func New(cfg Config, client Client, cs []checks.Check, idleStop Stopper, checkMetrics *checks.Metrics, metrics *Metrics, recorder Recorder, log *slog.Logger) (*Agent, error) {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	nodes := client.Kube.CoreV1().Nodes()
	a := &Agent{
		cfg: cfg, nodes: nodes, server: client.Server, clock: clk, log: log, metrics: metrics, recorder: recorder, idleStop: idleStop,
		view: newNodeView(nodes, cfg.NodeName, log),
		wake: make(chan struct{}, 1),
		lock: &retaintLock{
			leases: client.Kube.CoordinationV1().Leases(cfg.LeaseNamespace), namespace: cfg.LeaseNamespace, name: api.RetaintLease,
			holder: cfg.NodeName, duration: 15 * time.Second, clock: clk,
		},
	}
	metrics.observe.setMode(cfg.mode())
	a.loop.startup = newInitialBackoff(cfg.InitialBackoff, cfg.InitialTries, clk)
	a.loop.writeRetry = &backoff.ExponentialBackOff{
		InitialInterval: cfg.InitialBackoff, Multiplier: 2, RandomizationFactor: 0.2,
		MaxInterval: cfg.Period, Stop: backoff.Stop, Clock: clk,
	}
	a.loop.writeRetry.Reset()
	var continuous []checks.Check
	for _, c := range cs {
		name := c.Name()
		if g, ok := c.(checks.Gate); ok {
			g.Attach(gateHost{a})
			a.gates = append(a.gates, g)
		}
		on := a.continuous(name)
		if on {
			continuous = append(continuous, c)
			a.modes.Continuous = append(a.modes.Continuous, name)
		} else {
			a.modes.Bootstrap = append(a.modes.Bootstrap, name)
		}
		metrics.continuous.WithLabelValues(name).Set(metricsserver.Bool(on))
	}
	a.runner = checks.NewRunner(cs, cfg.CheckTimeout, checkMetrics, checks.WithClock(clk))
	if len(continuous) > 0 {
		a.periodic = checks.NewRunner(continuous, cfg.CheckTimeout, checkMetrics, checks.WithClock(clk))
	}
	if err := a.watchNode(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Agent) continuous(check string) bool { return slices.Contains(a.cfg.Continuous, check) }

// watchNode wakes the loop on the changes of the node it acts on at once.
func (a *Agent) watchNode() error {
	_, err := a.view.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// The initial list is not news: Run starts with a round anyway.
		AddFunc: func(_ any, initialList bool) {
			if !initialList {
				a.signal()
			}
		},
		DeleteFunc: func(any) { a.signal() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && a.relevantChange(o, n) {
				a.signal()
			}
		},
	})
	if err != nil {
		return err
	}
	return a.view.episodes.Attach(a.view.informer, func(ctx context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			go a.view.refresh(ctx)
		}
	})
}

// relevantChange is true when the bypass annotation or the wait-for taints
// changed, or what a gate waits for on a node being verified: those are
// acted on at once rather than at the next round. An idle (bootstrap-only,
// verified) agent also wakes when the startup taint comes back.
func (a *Agent) relevantChange(o, n *corev1.Node) bool {
	if a.bootstrapRound(n) && slices.ContainsFunc(a.gates, func(g checks.Gate) bool { return g.Changed(o, n) }) {
		return true
	}
	return a.bypassed(o) != a.bypassed(n) ||
		(a.cfg.ReverifyAfterReboot && o.Status.NodeInfo.BootID != n.Status.NodeInfo.BootID) ||
		HasAnyTaintKey(o.Spec.Taints, a.cfg.WaitForTaints) != HasAnyTaintKey(n.Spec.Taints, a.cfg.WaitForTaints) ||
		(a.idle.Load() && !a.cfg.Taints.startupOn(o.Spec.Taints) && a.cfg.Taints.startupOn(n.Spec.Taints))
}

func (a *Agent) bypassed(n *corev1.Node) bool {
	return n.Annotations[a.cfg.BypassAnnotation] == "true"
}

// Run verifies the node until ctx ends. It never touches the taint on the
// way out: a stopped agent leaves the node as it found it.
func (a *Agent) Run(ctx context.Context) error {
	go a.view.informer.RunWithContext(ctx)
	defer func() {
		for _, g := range a.gates {
			g.Stop()
		}
	}()
	a.log.Info("waiting for the node to appear in the watch")
	if !cache.WaitForCacheSync(ctx.Done(), a.view.informer.HasSynced) {
		return nil
	}
	timer := a.clock.NewTimer(0)
	defer timer.Stop()
	for {
		a.loop.woken = false
		select {
		case <-ctx.Done():
			a.log.Info("stopping; node taint left as it is")
			return nil
		case <-a.wake:
			a.loop.woken = true
			if !timer.Stop() {
				select {
				case <-timer.C():
				default:
				}
			}
		case <-timer.C():
		}
		next := a.step(ctx)
		a.metrics.iterations.Inc()
		a.loop.due = a.clock.Now().Add(next)
		timer.Reset(next)
	}
}

// step runs one iteration and returns the delay before the next.
func (a *Agent) step(ctx context.Context) time.Duration {
	node := a.view.node()
	if node == nil {
		if !a.loop.noNodeLogged {
			a.log.Warn("node not found; waiting for it to (re)appear")
			a.loop.noNodeLogged = true
		}
		a.health.set(false, a.apiReachable(ctx))
		return a.cfg.Period
	}
	a.loop.noNodeLogged = false
	if a.bypassed(node) {
		if a.cfg.Publish {
			return a.publishBypass(ctx, node)
		}
		return a.bypass(ctx)
	}
	if key := HasAnyTaintKey(node.Spec.Taints, a.cfg.WaitForTaints); key != "" {
		if a.loop.waitingFor != key {
			a.log.Info("waiting for taint to be removed before verifying", "taint", key)
			a.loop.waitingFor = key
		}
		return a.cfg.Period
	}
	a.loop.waitingFor = ""
	if a.cfg.Observe && !a.observeStart(ctx, node) {
		return a.cfg.InitialBackoff
	}
	if a.cfg.Publish && !a.publishStart(ctx, node) {
		return a.cfg.InitialBackoff
	}

	if a.holdAfterReboot(ctx, node) {
		node = a.view.node()
	}
	runner := a.runner
	bootstrap := a.bootstrapRound(node)
	a.runGates(ctx, bootstrap)
	if !bootstrap {
		if a.periodic == nil {
			return a.rest(ctx, node)
		}
		runner = a.periodic
	}
	a.idle.Store(false)
	round := runner.Run(ctx)
	if ctx.Err() != nil {
		return 0
	}
	if !round.Passed() {
		if fault, silent := a.controlPlaneFault(ctx, round); fault != nil {
			a.skip(round, fault, silent)
			return a.next(round)
		}
	}
	if a.loop.faultLogged {
		a.loop.faultLogged = false
		a.log.Info("control plane answers again; counting rounds from zero")
	}
	a.countOn(runner)
	if a.loop.woken && !round.Passed() && !a.startingUp() {
		return a.uncounted(round)
	}
	a.observe(round)
	if err := a.act(ctx, round, !bootstrap, node); err != nil {
		d := a.loop.writeRetry.NextBackOff()
		a.log.Error("update node failed; will retry", "error", err, "retry_in_seconds", d.Seconds())
		return d
	}
	a.loop.writeRetry.Reset()
	return a.next(round)
}

// bypass is the step while the bypass annotation is set: untaint, never
// re-taint, and nothing verified.
func (a *Agent) bypass(ctx context.Context) time.Duration {
	// Nothing is verified while bypassed: the gates' watches can go.
	a.runGates(ctx, false)
	if err := a.apply(ctx, Decide(State{Bypass: true}, a.cfg.Thresholds, a.cfg.Taints)); err != nil {
		a.log.Error("untaint for bypass annotation failed", "annotation", a.cfg.BypassAnnotation, "error", err)
		return a.cfg.InitialBackoff
	}
	if n := a.view.node(); n != nil && bootID(n) != "" {
		// The operator vouches for the node as it runs now.
		a.loop.boot = bootID(n)
	}
	a.setCondition(ctx, BypassedCondition(a.cfg.BypassAnnotation))
	a.health.set(true, true)
	return a.jittered()
}

// act decides on the node after a counted round and writes the decision
// and the condition. continuous says the round ran the continuous checks
// alone: only such a round can re-taint.
func (a *Agent) act(ctx context.Context, round checks.Round, continuous bool, node *corev1.Node) error {
	// The round took a while: decide on the node as it is now.
	if n := a.view.node(); n != nil {
		node = n
	}
	if a.cfg.Observe {
		return a.actObserve(ctx, round, continuous, node)
	}
	if a.cfg.Publish {
		return a.actPublish(ctx, round, continuous, node)
	}
	startupTainted, retainted := NodeState(node, a.cfg.Taints, a.cfg.VerifiedLabel)
	want := Decide(State{
		Passed: round.Passed(), Failures: a.loop.failures, Passes: a.loop.passes,
		StartupTainted: startupTainted, Retainted: retainted, Continuous: continuous,
	}, a.cfg.Thresholds, a.cfg.Taints)
	var err error
	if want.IsRetaint() {
		err = a.retaint(ctx, node, want)
	} else {
		err = a.apply(ctx, want)
	}
	switch {
	case !round.Passed() && RebootHeld(node, a.cfg.Taints, a.cfg.VerifiedLabel):
		a.setCondition(ctx, RebootHeldCondition(round.Failed(), a.loop.failingSince, a.modes))
	case !round.Passed():
		a.setCondition(ctx, FailingCondition(round.Failed(), a.loop.failingSince, a.modes))
	case retainted && a.loop.passes < a.cfg.Thresholds.Recover:
		a.setCondition(ctx, RecoveringCondition(a.loop.passes, a.cfg.Thresholds.Recover, a.modes))
	default:
		a.setCondition(ctx, PassingCondition(a.modes))
	}
	return err
}

// idleWait is how long a bootstrap-only agent sleeps between looks at its
// node when nothing wakes it; its watch wakes it for anything it acts on.
const idleWait = 24 * time.Hour

// rest is a bootstrap-only agent's step on a node in service: no rounds
// and no API requests, only its node's watch (the checks' watches are
// stopped). A startup taint that something re-added to a verified node
// (it never failed here) is removed again. A live node without our label
// (the chart installed into a running cluster) has passed all there is of
// the continuous checks, none: it is labelled verified, in one write.
func (a *Agent) rest(ctx context.Context, node *corev1.Node) time.Duration {
	if !a.idle.Swap(true) {
		a.log.Info("node verified; bootstrap-only, so no more rounds on this node")
		// No check reads until the node needs verifying again: the
		// EndpointSlice watches would cost the API server a watch (and
		// memory) per node for nothing. The gates' are stopped already.
		if a.idleStop != nil {
			a.idleStop.Stop()
		}
	}
	a.health.set(true, true)
	if a.cfg.Publish {
		// Verified (label true): nothing of ours to write but the conditions.
		a.publish(ctx, BootstrappedCondition(a.modes), nil)
		return idleWait
	}
	a.setCondition(ctx, BootstrappedCondition(a.modes))
	want := Desired{Label: "true", Continuous: true}
	if a.cfg.Taints.startupOn(node.Spec.Taints) {
		a.log.Info("startup taint re-added to a verified node; removing it again")
		want.Remove, want.RemoveKeys = []corev1.Taint{a.cfg.Taints.Startup}, a.cfg.Taints.PreviousStartup
	}
	// apply writes nothing when the node is as wanted already.
	if err := a.apply(ctx, want); err != nil {
		d := a.loop.writeRetry.NextBackOff()
		a.log.Error("update node failed; will retry", "error", err, "retry_in_seconds", d.Seconds())
		return d
	}
	a.loop.writeRetry.Reset()
	return idleWait
}
