// Package remediate handles nodes that never become usable: a node still
// carrying the agent's startup taint (or its unhealthy taint) longer than a
// deadline is reported, or replaced by deleting its Karpenter NodeClaim (so
// the instance goes too) or else the Node.
//
// It runs on the webhook's leader only, off by default, and is careful in
// the ways an automatic deleter of nodes must be:
//
//   - every delete, a first attempt or a retry, passes the same gates on a
//     fresh read of the node from the API server right before it (still
//     unverified, past the deadline, not protected, budget room, breaker
//     closed), and is guarded by the node's UID and resourceVersion;
//   - a node's time counts from when this controller first saw it
//     unverified, on its own clock, and never from before it began leading
//     or the API server last answered again after an outage;
//   - at most Config.MaxReplacing nodes go away at once, counted across the
//     unverified nodes still present that it marked as replacing or that are
//     being deleted (by it or anyone else); a mark counts only for the node
//     incarnation and state it was written for (see Mark);
//   - a circuit breaker stops replacing while most new nodes never verify
//     (see Breaker);
//   - it does nothing while the agents' fleet budget is used up (as many
//     nodes re-tainted as --max-retainted allows): then the fault is most
//     likely the cluster's, not the nodes';
//   - nodes annotated with the deletion-protection annotation are reported,
//     never replaced;
//   - dry-run reports what it would delete.
//
// It watches only nodes whose verified label is not "true" (a label-selected
// informer), so a healthy fleet costs one idle watch.
package remediate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
)

// Policy says what happens to a node past the unverified deadline.
type Policy string

// Policies.
const (
	PolicyOff     Policy = "off"
	PolicyReport  Policy = "report"
	PolicyReplace Policy = "replace"
)

// ParsePolicy accepts off, report or replace.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyOff, PolicyReport, PolicyReplace:
		return p, nil
	}
	return "", fmt.Errorf("%q is not off, report or replace", s)
}

// ReplacingAnnotation marks a node being replaced (value: a JSON Mark);
// such a node counts against the replacement budget until it is gone or
// leaves the unverified set. Removing it releases the budget.
const ReplacingAnnotation = api.ReplacingAnnotation

// NodeClaims is Karpenter's NodeClaim API.
var NodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// Event reasons, recorded on the Node.
const (
	// ReasonUnverified: past the deadline (policy report, dry-run, or a
	// replacement that is held back).
	ReasonUnverified = "NodeUnverifiedPastDeadline"
	// ReasonReplacing: its NodeClaim or the Node was deleted.
	ReasonReplacing = "NodeReplacing"
	// ReasonReplaceFailed: the delete failed; tried again next scan.
	ReasonReplaceFailed = "NodeReplaceFailed"
	// ReasonPaused: the circuit breaker opened; recorded once on the node
	// whose replacement it stopped first.
	ReasonPaused = "RemediationPaused"
	// ReasonResumed: a new node verified and closed the breaker; recorded on
	// that node.
	ReasonResumed = "RemediationResumed"
)

// Blocked reasons (the reason label of node_remediation_blocked_nodes).
const (
	blockedFleet     = "fleet_budget"
	blockedMax       = "max_replacing"
	blockedProtected = "protected"
	blockedBreaker   = "circuit_breaker"
)

var blockedReasons = []string{blockedFleet, blockedMax, blockedProtected, blockedBreaker}

// Config tunes the controller.
type Config struct {
	Policy Policy
	// Deadline is how long a node may carry one of Taints.
	Deadline time.Duration
	// MaxReplacing bounds the unverified nodes still present that are marked
	// as replacing or being deleted.
	MaxReplacing budget.Budget
	// FleetBudget is the agents' --max-retainted: while as many nodes carry
	// VerifiedLabel=false as it allows, nothing is replaced.
	FleetBudget budget.Budget
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// Interval between scans.
	Interval time.Duration
	// StartupTaint and UnhealthyTaint are the agent's taint keys.
	StartupTaint, UnhealthyTaint string
	// VerifiedLabel is the agent's label: "true" verified, "false" re-tainted.
	VerifiedLabel string
	// AgentSkipAnnotation is the agent's bypass: a node carrying it set to
	// "true" is vouched for by an operator: never replaced, and never counted
	// against the fleet budget whatever its label says (its agent may be down).
	AgentSkipAnnotation string
	// ReplacingAnnotation marks a node this controller replaced (value: when).
	ReplacingAnnotation string
	// ProtectAnnotation set to "true" keeps a node from being replaced.
	ProtectAnnotation string
	// NodeClaims makes a replacement delete the node's Karpenter NodeClaim
	// when the API exists and one owns the node.
	NodeClaims bool
	// Breaker stops replacing while most new nodes never verify.
	Breaker Breaker
	// TotalNodes counts every node (for percentages).
	TotalNodes func() int
	// Recorder records Events on Nodes; nil records none.
	Recorder events.EventRecorder
}

// Controller is the remediation loop.
type Controller struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	cfg    Config
	log    *slog.Logger
	now    func() time.Time

	// probe asks the API server whether it serves (an outage restarts every
	// node's time).
	probe func(context.Context) error

	// Touched by the scan loop only; obs and brk are new each leadership.
	obs       *observer
	brk       *breaker
	noted     map[types.UID]string    // last Event reason recorded per node, so a state is told once
	tripped   bool                    // fleet budget hold logged
	down      bool                    // API server outage logged
	claimsLog map[string]bool         // NodeClaim API trouble ("absent", "forbidden") logged once
	retried   map[types.UID]time.Time // first sight of a valid mark, or its last retry
	freshHeld map[types.UID]string    // gate that held a node on the fresh read, logged once
	claimList *claimCache             // this scan's NodeClaims, listed once when needed

	overdue     prometheus.Gauge
	replacing   prometheus.Gauge
	blocked     *prometheus.GaugeVec
	actions     *prometheus.CounterVec
	scans       *prometheus.CounterVec
	circuitOpen prometheus.Gauge
}

// New registers the metrics; Lead runs the loop.
func New(client kubernetes.Interface, dyn dynamic.Interface, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client: client, dyn: dyn, cfg: cfg, log: log, now: time.Now,
		noted: map[types.UID]string{}, claimsLog: map[string]bool{}, retried: map[types.UID]time.Time{},
		freshHeld: map[types.UID]string{},
		overdue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_remediation_overdue_nodes",
			Help: "Nodes carrying the startup or unhealthy taint past --unverified-deadline that are not being replaced.",
		}),
		replacing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_remediation_replacing_nodes",
			Help: "Unverified nodes still present that remediation marked as replacing or that are being deleted (counted against --max-replacing).",
		}),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "node_remediation_blocked_nodes",
			Help: "Overdue nodes not replaced in the last scan, by reason (fleet_budget, max_replacing, protected, circuit_breaker).",
		}, []string{"reason"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_remediation_actions_total",
			Help: "Remediation actions by action (report, dry_run, delete_nodeclaim, delete_node, unmark) and result (success, error).",
		}, []string{"action", "result"}),
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_remediation_scans_total",
			Help: "Remediation scans by result: ok (nodes judged), api_unreachable (the API server did not answer; nothing judged, and every node's time restarts when it answers again).",
		}, []string{"result"}),
		circuitOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_remediation_circuit_open",
			Help: "1 while the circuit breaker stops replacements because too many new nodes never verified (--remediation-breaker-threshold), else 0.",
		}),
	}
	for _, reason := range blockedReasons {
		c.blocked.WithLabelValues(reason)
	}
	for _, result := range []string{"ok", "api_unreachable"} {
		c.scans.WithLabelValues(result)
	}
	c.probe = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}
	for _, col := range []prometheus.Collector{c.overdue, c.replacing, c.blocked, c.actions, c.scans, c.circuitOpen} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("remediate: register metrics: %w", err)
		}
	}
	return c, nil
}

// Lead watches the unverified nodes and scans them every Interval until ctx
// ends (the process stops or leadership is lost).
func (c *Controller) Lead(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	if c.cfg.Policy == PolicyOff {
		return nil
	}
	sel := c.cfg.VerifiedLabel + "!=true"
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	inf := factory.Core().V1().Nodes()
	if err := inf.Informer().SetTransform(trim); err != nil {
		return fmt.Errorf("remediate: set transform: %w", err)
	}
	lister := inf.Lister()
	// A new leader, or this one again, judges nothing it has not watched for
	// a deadline itself.
	c.obs, c.brk = newObserver(c, c.now()), &breaker{cfg: c.cfg.Breaker}
	if c.cfg.Policy != PolicyReplace {
		c.brk.cfg = Breaker{} // nothing to stop: never opens
	}
	obs := c.obs
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { obs.observeObj(obj, c.now()) },
		UpdateFunc: func(_, obj any) { obs.observeObj(obj, c.now()) },
		DeleteFunc: obs.leaveObj,
	}); err != nil {
		return fmt.Errorf("remediate: add event handler: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("remediate: node cache never synced")
	}
	// A former leader's gauges would keep the alert firing: zero them when
	// leadership ends.
	defer func() {
		c.overdue.Set(0)
		c.replacing.Set(0)
		c.circuitOpen.Set(0)
		for _, reason := range blockedReasons {
			c.blocked.WithLabelValues(reason).Set(0)
		}
	}()
	c.log.Info("remediation running; every unverified node gets a full deadline from now before it is judged",
		"policy", c.cfg.Policy, "unverified_deadline", c.cfg.Deadline, "dry_run", c.cfg.DryRun,
		"nodeclaims", c.cfg.NodeClaims, "selector", sel,
		"breaker_threshold", c.cfg.Breaker.Threshold, "breaker_window", c.cfg.Breaker.Window)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		nodes, err := lister.List(labels.Everything())
		if err != nil {
			c.log.Error("list cached unverified nodes", "error", err)
			return
		}
		c.scan(ctx, nodes)
	}, c.cfg.Interval)
	return nil
}

// trim keeps what the decisions read: metadata and taints.
func trim(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Status = corev1.NodeStatus{}
	return n, nil
}

// state returns which of the agent's taints n carries when it is unverified
// (the verified label is not "true"): the startup taint first. A node an
// operator bypassed (AgentSkipAnnotation) is vouched for, not unverified:
// its agent removes the taints, and if that agent is down it is still not
// this controller's to replace.
func (c *Controller) state(n *corev1.Node) (taint string, unverified bool) {
	if n.Labels[c.cfg.VerifiedLabel] == "true" || c.bypassed(n) {
		return "", false
	}
	for _, key := range []string{c.cfg.StartupTaint, c.cfg.UnhealthyTaint} {
		if key != "" && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key }) {
			return key, true
		}
	}
	return "", false
}

// bypassed reports whether an operator set the agent's bypass annotation.
func (c *Controller) bypassed(n *corev1.Node) bool {
	return c.cfg.AgentSkipAnnotation != "" && n.Annotations[c.cfg.AgentSkipAnnotation] == "true"
}
