package remediate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// replace deletes the node's NodeClaim or the Node (or, in dry-run, says
// which it would), after the gates pass again on a fresh read of the node
// and the budgets; the node is marked first (guarded by that read's
// resourceVersion) so it counts against the budget even if this replica
// stops right after, and the Node delete is guarded by the marked node's
// UID and resourceVersion. Capacity that serves is never removed: a node in
// service goes only through its NodeClaim (Karpenter drains it), and a node
// that runs pods other than DaemonSet and mirror pods, read fresh, is not
// deleted at all. It reports whether the node is now going away, or the
// blocked reason that held it on the fresh read.
func (c *Controller) replace(ctx context.Context, o Overdue, total int, age time.Duration) (gone bool, blocked string) {
	log := c.log.With("node", o.Node.Name, "uid", string(o.Node.UID), "taint", o.Taint, "unverified_for", age.String())
	if c.cfg.DryRun && c.noted[o.Node.UID] == "dry-run" {
		return false, "" // told already
	}
	n, err := c.client.CoreV1().Nodes().Get(ctx, o.Node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && n.UID != o.Node.UID) {
		return false, ""
	}
	var cnt counts
	if err == nil {
		cnt, err = c.freshCounts(ctx, total)
	}
	if err != nil {
		log.Warn("cannot read the node again before replacing it; trying again next scan", "error", err)
		c.actions.WithLabelValues(actionFor(true), "error").Inc()
		return false, ""
	}
	now := c.clock.Now()
	taint, _ := c.state(n)
	since, _ := c.obs.since(n, now, c.cfg.Deadline)
	reason := c.gate(n, since, cnt, now)
	var claim *claimRef
	if reason == "" {
		if claim, err = c.nodeClaim(ctx, n); err != nil {
			log.Warn("cannot look up the node's NodeClaim; trying again next scan", "error", err)
			c.actions.WithLabelValues(actionFor(true), "error").Inc()
			return false, ""
		}
		reason, err = c.serves(ctx, n, claim)
		if err != nil {
			log.Warn("cannot read the pods on the node before replacing it; trying again next scan", "error", err)
			c.actions.WithLabelValues(actionFor(claim == nil), "error").Inc()
			return false, ""
		}
	}
	if reason != "" {
		if c.freshHeld[n.UID] != reason { // once per node and reason, not every scan
			c.freshHeld[n.UID] = reason
			log.Info("not replacing: a gate closed on a fresh read of the node", "gate", reason)
		}
		switch reason {
		case notUnverified, notOverdue:
			return false, ""
		}
		return false, reason
	}
	delete(c.freshHeld, n.UID)
	target := "Node " + n.Name
	if claim != nil {
		target = "NodeClaim " + claim.name
		if claim.deleting {
			target += " (already being deleted)"
		}
	}
	if c.cfg.DryRun {
		if c.note(n, "dry-run", corev1.EventTypeWarning, api.EventNodeUnverifiedPastDeadline,
			"carries %s for %s, past --unverified-deadline=%s; dry run: would delete %s", taint, age, c.cfg.Deadline, target) {
			log.Info("dry run: would replace the node", "delete", target)
			c.actions.WithLabelValues("dry_run", "success").Inc()
		}
		return false, ""
	}
	action := actionFor(claim == nil)
	_, retry := c.validMark(n)
	if retry && !c.stalled(n, now) {
		// Marked, and the mark not yet stalled: the cache the plan read
		// had not seen the mark yet. Its retry waits as any other.
		return false, ""
	}
	if !retry {
		if n, err = c.mark(ctx, n, c.newMark(n, taint, now)); err != nil {
			log.Warn("cannot mark the node as being replaced; judged again next scan", "error", err)
			c.actions.WithLabelValues(action, "error").Inc()
			return false, ""
		}
	}
	c.retried[n.UID] = now
	if err := c.delete(ctx, n, claim); err != nil {
		log.Error("replacing the node failed; judged again next scan", "delete", target, "error", err)
		c.actions.WithLabelValues(action, "error").Inc()
		c.note(n, "failed", corev1.EventTypeWarning, api.EventNodeReplaceFailed, "deleting %s failed: %v", target, err)
		// Even when stopping: a mark without a delete would hold the budget.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		c.removeMark(uctx, n, "its delete failed")
		return false, ""
	}
	if retry {
		log.Warn("a node marked as replacing was still not going away; deleted again after the gates passed", "delete", target)
	} else if c.neverVerified(n) {
		log.Warn("replacing a node that never verified", "delete", target)
	} else {
		log.Warn("replacing a re-tainted node through its NodeClaim: Karpenter drains it (--remediation-replace-retainted)", "delete", target)
	}
	c.actions.WithLabelValues(action, "success").Inc()
	c.note(n, "replacing", corev1.EventTypeWarning, api.EventNodeReplacing,
		"carried %s for %s, past --unverified-deadline=%s: deleted %s", taint, age, c.cfg.Deadline, target)
	return true, ""
}

// serves says why n, read fresh, must not be deleted because it holds
// capacity that serves, or "": a node in service (it verified once) only
// through claim, which Karpenter drains through the Eviction API; and by
// itself only a node whose pods are all DaemonSet or mirror pods (or have
// finished), read from the API server now, not from a cache.
func (c *Controller) serves(ctx context.Context, n *corev1.Node, claim *claimRef) (string, error) {
	if !c.neverVerified(n) {
		if claim == nil {
			return blockedNoDrain, nil
		}
		return "", nil // Karpenter cordons and drains it, honouring PodDisruptionBudgets
	}
	pods, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		return "", fmt.Errorf("list pods on node %s: %w", n.Name, err)
	}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == n.Name && workload(&pods.Items[i]) {
			return blockedWorkloads, nil
		}
	}
	return "", nil
}

// workload reports whether p is a pod whose loss someone would feel: not a
// DaemonSet's pod (it exists on every node and goes with the node), not a
// mirror pod (the kubelet's static pod) and not finished.
func workload(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" && ref.APIVersion == "apps/v1" {
		return false
	}
	return true
}

// freshCounts reads the unverified nodes from the API server (a consistent
// read, not the cache) for the budget gates right before a delete.
func (c *Controller) freshCounts(ctx context.Context, total int) (counts, error) {
	list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: c.cfg.VerifiedLabel + "!=true"})
	if err != nil {
		return counts{}, fmt.Errorf("list unverified nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	cnt := c.countsOf(nodes, max(total, len(nodes)))
	if cnt.refused, err = c.budgetRefused(ctx, c.clock.Now()); err != nil {
		return counts{}, err
	}
	// Fresh too: a suspend the watch delivers late still stops the delete,
	// and one that cannot be read holds it (gate).
	cnt.suspended = suspendBlocked(c.switchRead(ctx))
	return cnt, nil
}

// delete deletes claim (unless Karpenter is deleting it already) or, with
// none, the Node, guarded by the Node's UID and resourceVersion (the NodeClaim
// by its UID); gone already is success.
func (c *Controller) delete(ctx context.Context, n *corev1.Node, claim *claimRef) error {
	var err error
	switch {
	case claim != nil && claim.deleting:
		return nil
	case claim != nil:
		err = c.dyn.Resource(NodeClaims).Delete(ctx, claim.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &claim.uid}})
	default:
		err = c.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &n.UID, ResourceVersion: &n.ResourceVersion},
		})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func actionFor(node bool) string {
	if node {
		return "delete_node"
	}
	return "delete_nodeclaim"
}
