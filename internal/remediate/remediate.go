// Package remediate handles nodes that never become usable: a node still
// carrying the agent's startup taint (or its unhealthy taint) longer than a
// deadline is reported, or replaced by deleting its Karpenter NodeClaim (so
// the instance goes too) or else the Node.
//
// It runs on the webhook's leader only, off by default, and is careful in
// the ways an automatic deleter of nodes must be:
//
//   - at most Config.MaxReplacing nodes go away at once, counted across the
//     unverified nodes still present that it marked as replacing or that are
//     being deleted (by it or anyone else);
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
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	"github.com/kube-node-ready/kube-node-ready/internal/budget"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
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

// ConditionType is the agent's condition on its node (agent.ConditionType);
// its last transition to False dates an unhealthy taint.
const ConditionType corev1.NodeConditionType = "KubeNodeReady"

// ReplacingAnnotation marks a node being replaced (value: since when, RFC
// 3339); such a node counts against the replacement budget until it is
// gone. Removing it releases the budget.
const ReplacingAnnotation = "infra.894.io/replacing"

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
)

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
	// ReplacingAnnotation marks a node this controller replaced (value: when).
	ReplacingAnnotation string
	// ProtectAnnotation set to "true" keeps a node from being replaced.
	ProtectAnnotation string
	// NodeClaims makes a replacement delete the node's Karpenter NodeClaim
	// when the API exists and one owns the node.
	NodeClaims bool
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

	// Touched by the scan loop only.
	noted       map[types.UID]string    // last Event reason recorded per node, so a state is told once
	taintedSeen map[types.UID]time.Time // first sight of an unhealthy taint without a dating condition
	tripped     bool
	claimsLog   map[string]bool         // NodeClaim API trouble ("absent", "forbidden") logged once
	retried     map[types.UID]time.Time // last retry of a stalled replacement
	claimList   *claimCache             // this scan's NodeClaims, listed once when needed

	overdue   prometheus.Gauge
	replacing prometheus.Gauge
	blocked   *prometheus.GaugeVec
	actions   *prometheus.CounterVec
}

// New registers the metrics; Lead runs the loop.
func New(client kubernetes.Interface, dyn dynamic.Interface, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Controller, error) {
	c := &Controller{
		client: client, dyn: dyn, cfg: cfg, log: log, now: time.Now,
		noted: map[types.UID]string{}, taintedSeen: map[types.UID]time.Time{},
		claimsLog: map[string]bool{}, retried: map[types.UID]time.Time{},
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
			Help: "Overdue nodes not replaced in the last scan, by reason (fleet_budget, max_replacing, protected).",
		}, []string{"reason"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_remediation_actions_total",
			Help: "Remediation actions by action (report, dry_run, delete_nodeclaim, delete_node) and result (success, error).",
		}, []string{"action", "result"}),
	}
	for _, reason := range []string{"fleet_budget", "max_replacing", "protected"} {
		c.blocked.WithLabelValues(reason)
	}
	for _, col := range []prometheus.Collector{c.overdue, c.replacing, c.blocked, c.actions} {
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
		c.blocked.Reset()
	}()
	c.log.Info("remediation running", "policy", c.cfg.Policy, "unverified_deadline", c.cfg.Deadline,
		"dry_run", c.cfg.DryRun, "nodeclaims", c.cfg.NodeClaims, "selector", sel)
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

// trim keeps what the decisions read: metadata, taints, conditions.
func trim(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Status = corev1.NodeStatus{Conditions: n.Status.Conditions}
	return n, nil
}

// Plan is what one scan decided.
type Plan struct {
	// Overdue are the nodes past the deadline not yet being replaced, oldest first.
	Overdue []Overdue
	// Replacing counts nodes already going away (ours, or being deleted).
	Replacing int
	// Retainted counts nodes the agents re-tainted (VerifiedLabel=false).
	Retainted int
	// FleetLimit and ReplaceLimit are the two budgets for this cluster size.
	FleetLimit, ReplaceLimit int
	// Replace are the overdue nodes to replace now; Blocked says why the
	// others are not (node name → fleet_budget, max_replacing, protected).
	Replace []Overdue
	Blocked map[string]string
	// Stalled are nodes marked as replacing long ago that are still not
	// being deleted: their delete is tried again.
	Stalled []*corev1.Node
}

// Overdue is a node past the deadline.
type Overdue struct {
	Node  *corev1.Node
	Taint string
	Since time.Time

	retainted bool // the agents re-tainted it (VerifiedLabel=false)
}

// fleetTrippedFor says whether the agents' fleet budget is used up by nodes
// other than the candidate: its own re-taint does not count against it, or
// in a small cluster (a budget of 1) the one re-tainted node could never be
// replaced.
func (p Plan) fleetTrippedFor(o Overdue) bool {
	others := p.Retainted
	if o.retainted {
		others--
	}
	return others >= p.FleetLimit
}

// plan decides, from the cached unverified nodes, which are overdue and
// which of those may be replaced now.
func (c *Controller) plan(nodes []*corev1.Node, total int, now time.Time) Plan {
	p := Plan{
		FleetLimit:   c.cfg.FleetBudget.Limit(total),
		ReplaceLimit: c.cfg.MaxReplacing.Limit(total),
		Blocked:      map[string]string{},
	}
	live := make(map[types.UID]bool, len(nodes))
	for _, n := range nodes {
		live[n.UID] = true
		if n.Labels[c.cfg.VerifiedLabel] == "false" {
			p.Retainted++
		}
		if mark := n.Annotations[c.cfg.ReplacingAnnotation]; n.DeletionTimestamp != nil || mark != "" {
			p.Replacing++
			if n.DeletionTimestamp == nil && c.stalled(n, mark, now) {
				p.Stalled = append(p.Stalled, n)
			}
			continue
		}
		taint, since, ok := c.unverifiedSince(n, now)
		if !ok || now.Sub(since) < c.cfg.Deadline {
			continue
		}
		p.Overdue = append(p.Overdue, Overdue{Node: n, Taint: taint, Since: since, retainted: n.Labels[c.cfg.VerifiedLabel] == "false"})
	}
	for uid := range c.taintedSeen {
		if !live[uid] {
			delete(c.taintedSeen, uid)
		}
	}
	for uid := range c.noted {
		if !live[uid] {
			delete(c.noted, uid)
		}
	}
	for uid := range c.retried {
		if !live[uid] {
			delete(c.retried, uid)
		}
	}
	sort.Slice(p.Overdue, func(i, j int) bool {
		if !p.Overdue[i].Since.Equal(p.Overdue[j].Since) {
			return p.Overdue[i].Since.Before(p.Overdue[j].Since)
		}
		return p.Overdue[i].Node.Name < p.Overdue[j].Node.Name
	})
	if c.cfg.Policy != PolicyReplace {
		return p
	}
	room := p.ReplaceLimit - p.Replacing
	for _, o := range p.Overdue {
		switch {
		case c.cfg.ProtectAnnotation != "" && o.Node.Annotations[c.cfg.ProtectAnnotation] == "true":
			p.Blocked[o.Node.Name] = "protected"
		case p.fleetTrippedFor(o):
			p.Blocked[o.Node.Name] = "fleet_budget"
		case c.cfg.DryRun:
			p.Replace = append(p.Replace, o) // reported, never deleted: no budget used
		case room <= 0:
			p.Blocked[o.Node.Name] = "max_replacing"
		default:
			p.Replace = append(p.Replace, o)
			room--
		}
	}
	return p
}

// unverifiedSince returns which of the agent's taints n carries and since
// when: a node that never verified from its creation; a re-tainted one
// (VerifiedLabel=false, whichever taint the agents re-taint with) or one
// with the unhealthy taint from the agent's condition turning False, or,
// without one, from when this replica first saw it.
func (c *Controller) unverifiedSince(n *corev1.Node, now time.Time) (string, time.Time, bool) {
	has := func(key string) bool {
		return key != "" && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
	}
	taint := c.cfg.StartupTaint
	if !has(taint) {
		taint = c.cfg.UnhealthyTaint
	}
	if !has(taint) {
		delete(c.taintedSeen, n.UID)
		return "", time.Time{}, false
	}
	if taint == c.cfg.StartupTaint && n.Labels[c.cfg.VerifiedLabel] != "false" {
		delete(c.taintedSeen, n.UID)
		return taint, n.CreationTimestamp.Time, true
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == ConditionType && cond.Status == corev1.ConditionFalse && !cond.LastTransitionTime.IsZero() {
			return taint, cond.LastTransitionTime.Time, true
		}
	}
	seen, ok := c.taintedSeen[n.UID]
	if !ok {
		seen = now
		c.taintedSeen[n.UID] = now
	}
	return taint, seen, true
}

// stalled reports whether a node marked as replacing at mark (RFC 3339) is
// due for another delete: marked more than stallAfter ago (the delete after
// the mark failed, or this replica stopped in between) and not retried since.
func (c *Controller) stalled(n *corev1.Node, mark string, now time.Time) bool {
	after := max(2*c.cfg.Interval, 30*time.Second)
	at, err := time.Parse(time.RFC3339, mark)
	if err != nil || now.Sub(at) < after {
		return false
	}
	last, ok := c.retried[n.UID]
	return !ok || now.Sub(last) >= after
}

// scan plans and acts once.
func (c *Controller) scan(ctx context.Context, nodes []*corev1.Node) {
	total := len(nodes)
	if c.cfg.TotalNodes != nil {
		total = max(total, c.cfg.TotalNodes())
	}
	now := c.now()
	p := c.plan(nodes, total, now)
	c.claimList = &claimCache{}
	defer func() { c.claimList = nil }()

	blocked := map[string]int{}
	for _, reason := range p.Blocked {
		blocked[reason]++
	}
	for _, reason := range []string{"fleet_budget", "max_replacing", "protected"} {
		c.blocked.WithLabelValues(reason).Set(float64(blocked[reason]))
	}
	c.replacing.Set(float64(p.Replacing))

	for _, n := range p.Stalled {
		if c.cfg.Policy == PolicyReplace && !c.cfg.DryRun {
			c.retried[n.UID] = now
			c.retry(ctx, n)
		}
	}
	if tripped := blocked["fleet_budget"] > 0; tripped != c.tripped {
		c.tripped = tripped
		if tripped {
			c.log.Warn("not replacing overdue nodes: the agents' fleet budget is used up, so the fault is most likely the cluster's",
				"retainted_nodes", p.Retainted, "fleet_limit", p.FleetLimit, "overdue_nodes", len(p.Overdue))
		} else {
			c.log.Info("fleet budget no longer used up; replacements may resume", "retainted_nodes", p.Retainted, "fleet_limit", p.FleetLimit)
		}
	}

	replaced := 0
	for _, o := range p.Overdue {
		n := o.Node
		age := now.Sub(o.Since).Round(time.Second)
		if c.cfg.Policy == PolicyReport {
			c.note(n, "report", corev1.EventTypeWarning, ReasonUnverified,
				"carries %s for %s, past --unverified-deadline=%s; policy report: nothing is done", o.Taint, age, c.cfg.Deadline)
			continue
		}
		if reason, ok := p.Blocked[n.Name]; ok {
			c.note(n, "blocked:"+reason, corev1.EventTypeWarning, ReasonUnverified,
				"carries %s for %s, past --unverified-deadline=%s; not replaced: %s", o.Taint, age, c.cfg.Deadline, blockedText(reason, p))
			continue
		}
		if c.replace(ctx, o, age) {
			replaced++
		}
	}
	c.overdue.Set(float64(len(p.Overdue) - replaced))
}

func blockedText(reason string, p Plan) string {
	switch reason {
	case "protected":
		return "the node is protected from deletion"
	case "fleet_budget":
		return fmt.Sprintf("%d nodes are re-tainted, the agents' fleet budget of %d is used up: a cluster-wide fault is not this node's", p.Retainted, p.FleetLimit)
	default:
		return fmt.Sprintf("%d nodes are being replaced (--max-replacing allows %d)", p.Replacing+len(p.Replace), p.ReplaceLimit)
	}
}

// replace deletes the node's NodeClaim or the Node (or, in dry-run, says
// which it would), marking the node first so it counts against the budget
// even if this replica stops right after. It reports whether the node is
// now going away.
func (c *Controller) replace(ctx context.Context, o Overdue, age time.Duration) bool {
	n := o.Node
	log := c.log.With("node", n.Name, "uid", string(n.UID), "taint", o.Taint, "unverified_for", age.String())
	if c.cfg.DryRun && c.noted[n.UID] == "dry-run" {
		return false // told already
	}
	claim, err := c.nodeClaim(ctx, n)
	if err != nil {
		log.Warn("cannot look up the node's NodeClaim; trying again next scan", "error", err)
		c.actions.WithLabelValues(actionFor(true), "error").Inc()
		return false
	}
	target := "Node " + n.Name
	if claim != nil {
		target = "NodeClaim " + claim.name
		if claim.deleting {
			target += " (already being deleted)"
		}
	}
	if c.cfg.DryRun {
		if c.note(n, "dry-run", corev1.EventTypeWarning, ReasonUnverified,
			"carries %s for %s, past --unverified-deadline=%s; dry run: would delete %s", o.Taint, age, c.cfg.Deadline, target) {
			log.Info("dry run: would replace the node", "delete", target)
			c.actions.WithLabelValues("dry_run", "success").Inc()
		}
		return false
	}
	action := actionFor(claim == nil)
	if err := c.mark(ctx, n); err != nil {
		log.Warn("cannot mark the node as being replaced; trying again next scan", "error", err)
		c.actions.WithLabelValues(action, "error").Inc()
		return false
	}
	err = c.delete(ctx, n, claim)
	if err != nil {
		log.Error("replacing the node failed; trying again next scan", "delete", target, "error", err)
		c.actions.WithLabelValues(action, "error").Inc()
		c.note(n, "failed", corev1.EventTypeWarning, ReasonReplaceFailed, "deleting %s failed: %v", target, err)
		// Even when stopping: a mark without a delete would hold the budget.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := c.unmark(uctx, n); err != nil {
			log.Warn("cannot unmark the node; it keeps counting against --max-replacing until it is gone or the annotation removed",
				"annotation", c.cfg.ReplacingAnnotation, "error", err)
		}
		return false
	}
	log.Warn("replacing a node that never verified", "delete", target)
	c.actions.WithLabelValues(action, "success").Inc()
	c.note(n, "replacing", corev1.EventTypeWarning, ReasonReplacing,
		"carried %s for %s, past --unverified-deadline=%s: deleted %s", o.Taint, age, c.cfg.Deadline, target)
	return true
}

// delete deletes claim (unless Karpenter is deleting it already) or, with
// none, the Node, each guarded by its UID; gone already is success.
func (c *Controller) delete(ctx context.Context, n *corev1.Node, claim *claimRef) error {
	var err error
	switch {
	case claim != nil && claim.deleting:
		return nil
	case claim != nil:
		err = c.dyn.Resource(NodeClaims).Delete(ctx, claim.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &claim.uid}})
	default:
		err = c.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// retry deletes again for a node marked as replacing long ago that is still
// not being deleted: its NodeClaim if one is left, else the Node.
func (c *Controller) retry(ctx context.Context, n *corev1.Node) {
	claim, err := c.nodeClaim(ctx, n)
	if err == nil {
		err = c.delete(ctx, n, claim)
	}
	target := "Node " + n.Name
	if claim != nil {
		target = "NodeClaim " + claim.name
	}
	if err != nil {
		c.log.Warn("a node marked as replacing is still not going away, and deleting again failed", "node", n.Name, "delete", target, "error", err)
		c.actions.WithLabelValues(actionFor(claim == nil), "error").Inc()
		return
	}
	c.log.Warn("a node marked as replacing was still not going away; deleted again", "node", n.Name, "delete", target,
		"annotation", c.cfg.ReplacingAnnotation+"="+n.Annotations[c.cfg.ReplacingAnnotation])
	c.actions.WithLabelValues(actionFor(claim == nil), "success").Inc()
}

func actionFor(node bool) string {
	if node {
		return "delete_node"
	}
	return "delete_nodeclaim"
}

// mark sets the replacing annotation, guarded by the resourceVersion the
// decision was made on: a node that changed since (say, just verified) gets
// a conflict and is judged again next scan.
func (c *Controller) mark(ctx context.Context, n *corev1.Node) error {
	return c.annotate(ctx, n, fmt.Sprintf("%q", c.now().UTC().Format(time.RFC3339)), n.ResourceVersion)
}

func (c *Controller) unmark(ctx context.Context, n *corev1.Node) error {
	return c.annotate(ctx, n, "null", "")
}

// annotate sets the replacing annotation to value (JSON; null removes it)
// with a merge patch that touches nothing else, guarded by the node's UID
// and, when given, its resourceVersion.
func (c *Controller) annotate(ctx context.Context, n *corev1.Node, value, resourceVersion string) error {
	rv := ""
	if resourceVersion != "" {
		rv = fmt.Sprintf(`"resourceVersion":%q,`, resourceVersion)
	}
	patch := fmt.Sprintf(`{"metadata":{%s"uid":%q,"annotations":{%q:%s}}}`, rv, n.UID, c.cfg.ReplacingAnnotation, value)
	_, err := c.client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// note records an Event about n and reports true, unless n's last note had
// the same key (a state is told once, not every scan).
func (c *Controller) note(n *corev1.Node, key, eventType, reason, format string, args ...any) bool {
	if c.noted[n.UID] == key {
		return false
	}
	c.noted[n.UID] = key
	if key == "report" {
		c.actions.WithLabelValues("report", "success").Inc()
		c.log.Warn("node unverified past the deadline", "node", n.Name, "policy", c.cfg.Policy)
	}
	if c.cfg.Recorder != nil {
		c.cfg.Recorder.Eventf(n, nil, eventType, reason, "Remediate", "%s", eventnote.Shorten(fmt.Sprintf(format, args...)))
	}
	return true
}
