// Package agent is the node-local verifier: it runs the checks on its own
// node, removes the startup taint when they pass, and re-taints the node when
// they keep failing, within a cluster-wide budget.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
)

// Event reasons recorded on the Node.
const (
	ReasonVerified           = "NodeVerified"
	ReasonVerificationFailed = "NodeVerificationFailed"
	ReasonRetainted          = "NodeRetainted"
	ReasonRetaintSuppressed  = "RetaintSuppressed"
	// ReasonRetaintDeferred: a re-taint waits for the re-taint Lease.
	ReasonRetaintDeferred = "RetaintDeferred"
)

// Agent verifies one node. Create it with New and call Run.
type Agent struct {
	opts   *Options
	client Client
	log    *slog.Logger
	// runner runs every enabled check: the rounds until the first untaint.
	runner *checks.Runner
	// periodic runs the continuous checks once the node is verified; nil
	// when there are none (bootstrap-only: no rounds after verification).
	periodic *checks.Runner
	metrics  *Metrics
	recorder Recorder
	taints   Taints
	thresh   Thresholds
	budget   budget.Budget
	informer cache.SharedIndexInformer
	lock     *retaintLock
	// writeRetry spaces the rounds after a failed write to the node, so a
	// passed round is not left waiting a whole period for its untaint.
	writeRetry backoff.BackOff
	// wake is signalled when the node changes in a way that should not wait for the next round.
	wake chan struct{}
	// idle is set while a bootstrap-only agent has nothing to do but watch
	// its node; the startup taint coming back then wakes it.
	idle atomic.Bool

	mu         sync.Mutex
	roundsDone bool
	apiOK      bool
	// written is the node as the agent's own last write returned it: newer
	// than the informer's copy until the watch delivers that write.
	written *corev1.Node

	// modes names the continuous and bootstrap checks in the condition.
	modes CheckModes
	// The gates, nil when off; dsWatch feeds the DaemonSet gate.
	condGate *checks.Conditions
	dsGate   *checks.DaemonSets
	dsWatch  *daemonSetWatch

	// Owned by the Run loop.
	// woken is set while a step runs because the node's watch woke the
	// loop, not the timer; due is when the next periodic round is due.
	woken        bool
	due          time.Time
	failures     int
	passes       int
	failingSince time.Time
	// faultLogged is set while rounds are not counted because of a
	// control-plane fault, so that is logged once per outage.
	faultLogged  bool
	condErr      bool
	everVerified bool
	noNodeLogged bool
	// blockedLogged is why a wanted re-taint was last blocked, so that is
	// logged once per episode.
	blockedLogged string
	waitingFor    string
	// exclusionsChecked is set once unmatched gate exclusions were reported.
	exclusionsChecked bool
}

// New wires an agent from validated options and the checks BuildChecks
// made; it adds the gates the options enable, which read the agent's own
// view of its node.
func New(opts *Options, client Client, cs []checks.Check, checkMetrics *checks.Metrics, metrics *Metrics, recorder Recorder, log *slog.Logger) (*Agent, error) {
	startup, err := ParseTaint(opts.StartupTaint)
	if err != nil {
		return nil, err
	}
	unhealthy, err := ParseTaint(opts.UnhealthyTaint)
	if err != nil {
		return nil, err
	}
	fleetBudget, err := budget.Parse(opts.MaxRetainted)
	if err != nil {
		return nil, err
	}
	// Watch only our own node: a field-selected list+watch, never all nodes.
	own := fields.OneTermEqualSelector("metadata.name", opts.NodeName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = own
			return client.ListNodes(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = own
			return client.WatchNodes(ctx, o)
		},
	}
	a := &Agent{
		opts: opts, client: client, log: log, metrics: metrics, recorder: recorder,
		taints:   Taints{Startup: startup, Unhealthy: unhealthy},
		thresh:   Thresholds{Retaint: opts.RetaintThreshold, Recover: opts.RecoverThreshold},
		budget:   fleetBudget,
		informer: cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{}),
		wake:     make(chan struct{}, 1),
		lock: &retaintLock{
			client: client, namespace: opts.PodNamespace, name: "kube-node-ready-retaint",
			holder: opts.NodeName, duration: 15 * time.Second, now: time.Now,
		},
		writeRetry: &backoff.ExponentialBackOff{
			InitialInterval: opts.InitialBackoff, Multiplier: 2, RandomizationFactor: 0.2,
			MaxInterval: opts.Period, Stop: backoff.Stop, Clock: backoff.SystemClock,
		},
	}
	a.writeRetry.Reset()
	all, err := a.addGates(cs)
	if err != nil {
		return nil, err
	}
	var continuous []checks.Check
	for _, c := range all {
		name := c.Name()
		if opts.Continuous(name) {
			continuous = append(continuous, c)
			a.modes.Continuous = append(a.modes.Continuous, name)
		} else {
			a.modes.Bootstrap = append(a.modes.Bootstrap, name)
		}
		metrics.continuous.WithLabelValues(name).Set(map[bool]float64{true: 1, false: 0}[opts.Continuous(name)])
	}
	a.runner = checks.NewRunner(all, opts.CheckTimeout, checkMetrics)
	if len(continuous) > 0 {
		a.periodic = checks.NewRunner(continuous, opts.CheckTimeout, checkMetrics)
	}
	_, err = a.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
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
		return nil, err
	}
	// After the watch expires the reflector re-lists on its own backoff; a
	// GET of the node meanwhile keeps decisions on its current state.
	err = a.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			go a.refresh(ctx)
		}
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// refresh reads the node from the API server and keeps it when it is newer
// than what the informer holds.
func (a *Agent) refresh(ctx context.Context) {
	n, err := a.client.GetNode(ctx, a.opts.NodeName)
	if err == nil {
		a.remember(n)
	}
}

// remember keeps n, the node as a write or a direct read returned it.
func (a *Agent) remember(n *corev1.Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written == nil || newer(n, a.written) {
		a.written = n
	}
}

// newer reports whether a is a later version of the same node than b.
// Resource versions compare only where the server says they do (etcd's do);
// otherwise a is not taken as newer.
func newer(a, b *corev1.Node) bool {
	if a.UID != b.UID {
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	}
	c, err := resourceversion.CompareResourceVersion(a.ResourceVersion, b.ResourceVersion)
	return err == nil && c > 0
}

// relevantChange is true when the bypass annotation or the wait-for taints
// changed: those are acted on at once rather than at the next round.
// An idle (bootstrap-only, verified) agent also wakes when the startup
// taint comes back.
func (a *Agent) relevantChange(o, n *corev1.Node) bool {
	if a.condGate != nil && !a.bootstrapped(n) &&
		(len(checks.UnmetConditions(o, a.condGate.Required, a.condGate.AbsentPasses)) == 0) !=
			(len(checks.UnmetConditions(n, a.condGate.Required, a.condGate.AbsentPasses)) == 0) {
		return true
	}
	return a.bypassed(o) != a.bypassed(n) ||
		HasAnyTaintKey(o.Spec.Taints, a.opts.WaitForTaints) != HasAnyTaintKey(n.Spec.Taints, a.opts.WaitForTaints) ||
		(a.idle.Load() && !HasTaint(o.Spec.Taints, a.taints.Startup) && HasTaint(n.Spec.Taints, a.taints.Startup))
}

func (a *Agent) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Agent) bypassed(n *corev1.Node) bool {
	return n.Annotations[a.opts.SkipAnnotation] == "true"
}

// Ready reports whether a first round has finished and the API server was
// reachable in the last one: the /readyz answer.
func (a *Agent) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case !a.roundsDone:
		return errors.New("no verification round finished yet")
	case !a.apiOK:
		return errors.New("API server not reachable in the last round")
	}
	return nil
}

// Run verifies the node until ctx ends. It never touches the taint on the
// way out: a stopped agent leaves the node as it found it.
func (a *Agent) Run(ctx context.Context) error {
	go a.informer.RunWithContext(ctx)
	if a.dsWatch != nil {
		// List DaemonSets and pods while the node is listed.
		a.dsWatch.start(ctx)
	}
	a.log.Info("waiting for the node to appear in the watch")
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.HasSynced) {
		return nil
	}
	initial := newInitialBackoff(a.opts.InitialBackoff, a.opts.InitialTries)
	inInitial := true
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		a.woken = false
		select {
		case <-ctx.Done():
			a.log.Info("stopping; node taint left as it is")
			if a.dsWatch != nil {
				a.dsWatch.stop()
			}
			return nil
		case <-a.wake:
			a.woken = true
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
		next := a.step(ctx, &inInitial, initial)
		a.metrics.iterations.Inc()
		a.due = time.Now().Add(next)
		timer.Reset(next)
	}
}

// step runs one iteration and returns the delay before the next.
func (a *Agent) step(ctx context.Context, inInitial *bool, initial backoff.BackOff) time.Duration {
	node := a.cachedNode()
	if node == nil {
		if !a.noNodeLogged {
			a.log.Warn("node not found; waiting for it to (re)appear")
			a.noNodeLogged = true
		}
		a.setReady(false, a.apiReachable(ctx))
		return a.opts.Period
	}
	a.noNodeLogged = false
	if a.bypassed(node) {
		// Nothing is verified while bypassed: the gates' watches can go.
		a.runGates(ctx, false)
		if err := a.apply(ctx, Decide(State{Bypass: true}, a.thresh, a.taints)); err != nil {
			a.log.Error("untaint for bypass annotation failed", "annotation", a.opts.SkipAnnotation, "error", err)
			return a.opts.InitialBackoff
		}
		a.setCondition(ctx, BypassedCondition(a.opts.SkipAnnotation))
		a.setReady(true, true)
		return a.jittered()
	}
	if key := HasAnyTaintKey(node.Spec.Taints, a.opts.WaitForTaints); key != "" {
		if a.waitingFor != key {
			a.log.Info("waiting for taint to be removed before verifying", "taint", key)
			a.waitingFor = key
		}
		return a.opts.Period
	}
	a.waitingFor = ""

	runner := a.runner
	a.runGates(ctx, !a.bootstrapped(node))
	if a.bootstrapped(node) {
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
		if fault := a.controlPlaneFault(ctx, round); fault != nil {
			a.skip(round, fault)
			return a.next(ctx, round, inInitial, initial)
		}
	}
	if a.faultLogged {
		a.faultLogged = false
		a.log.Info("control plane answers again; counting rounds from zero")
	}
	if a.woken && !round.Passed() && !a.startingUp() {
		return a.uncounted(round)
	}
	a.observe(round)
	// The round took a while: decide on the node as it is now.
	if n := a.cachedNode(); n != nil {
		node = n
	}
	startupTainted, retainted := NodeState(node, a.taints, a.opts.VerifiedLabel)
	want := Decide(State{
		Passed: round.Passed(), Failures: a.failures, Passes: a.passes,
		StartupTainted: startupTainted, Retainted: retainted,
	}, a.thresh, a.taints)
	var err error
	if want.IsRetaint() {
		err = a.retaint(ctx, node, want)
	} else {
		err = a.apply(ctx, want)
	}
	switch {
	case !round.Passed():
		a.setCondition(ctx, FailingCondition(round.Failed(), a.failingSince, a.modes))
	case retainted && a.passes < a.thresh.Recover:
		a.setCondition(ctx, RecoveringCondition(a.passes, a.thresh.Recover, a.modes))
	default:
		a.setCondition(ctx, PassingCondition(a.modes))
	}
	if err != nil {
		d := a.writeRetry.NextBackOff()
		a.log.Error("update node failed; will retry", "error", err, "retry_in_seconds", d.Seconds())
		return d
	}
	a.writeRetry.Reset()
	return a.next(ctx, round, inInitial, initial)
}

// idleWait is how long a bootstrap-only agent sleeps between looks at its
// node when nothing wakes it; its watch wakes it for anything it acts on.
const idleWait = 24 * time.Hour

// bootstrapped reports whether the bootstrap checks are done on this node:
// it was verified once (the label is set). A node re-tainted earlier
// (label false) under a bootstrap-only agent must pass every check again,
// as nothing else would ever untaint it.
func (a *Agent) bootstrapped(node *corev1.Node) bool {
	switch node.Labels[a.opts.VerifiedLabel] {
	case "true":
		return true
	case "false":
		return a.periodic != nil
	}
	return false
}

// rest is a bootstrap-only agent's step once the node is verified: no
// rounds and no API requests, only its node's watch. A startup taint that
// something re-added (the node never failed here) is removed again.
func (a *Agent) rest(ctx context.Context, node *corev1.Node) time.Duration {
	if !a.idle.Swap(true) {
		a.log.Info("node verified; bootstrap-only, so no more rounds on this node")
	}
	a.setReady(true, true)
	a.setCondition(ctx, BootstrappedCondition(a.modes))
	if HasTaint(node.Spec.Taints, a.taints.Startup) {
		a.log.Info("startup taint re-added to a verified node; removing it again")
		if err := a.apply(ctx, Desired{Remove: []corev1.Taint{a.taints.Startup}, Label: "true"}); err != nil {
			d := a.writeRetry.NextBackOff()
			a.log.Error("update node failed; will retry", "error", err, "retry_in_seconds", d.Seconds())
			return d
		}
		a.writeRetry.Reset()
	}
	return idleWait
}

// setCondition writes the agent's condition on its node when it differs
// from what the node (as last seen) says. A failed write is logged once per
// streak and retried with the next round; it never holds up a decision.
func (a *Agent) setCondition(ctx context.Context, want ConditionState) {
	node := a.cachedNode()
	if node == nil {
		return
	}
	patch, err := ConditionPatch(node, want, time.Now())
	if err != nil || patch == nil {
		return
	}
	updated, err := a.client.PatchNodeStatus(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "kube-node-ready-agent"})
	if err == nil {
		a.remember(updated)
	}
	switch {
	case err != nil && !a.condErr:
		a.condErr = true
		a.log.Warn("cannot write the node condition; will retry with later rounds", "condition", string(ConditionType), "error", err)
	case err == nil:
		a.condErr = false
	}
}

func (a *Agent) setReady(done, apiOK bool) {
	a.mu.Lock()
	a.roundsDone = a.roundsDone || done
	a.apiOK = apiOK
	a.mu.Unlock()
}

func (a *Agent) apiReachable(ctx context.Context) bool {
	_, err := a.client.ServerVersion(ctx)
	return err == nil
}

// cachedNode returns the freshest known state of the node: the informer's
// copy, or the agent's own last write (or read) when that is newer, as it is
// until the watch delivers it. nil when the informer does not have the node.
func (a *Agent) cachedNode() *corev1.Node {
	obj, ok, err := a.informer.GetStore().GetByKey(a.opts.NodeName)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	if n == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written != nil && newer(a.written, n) {
		return a.written
	}
	a.written = nil
	return n
}
