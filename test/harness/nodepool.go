package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// NodePoolOptions shapes a NodePool of KarpenterNodeClass.
type NodePoolOptions struct {
	// Name is the NodePool's name; its NodeClaims and Nodes carry it as
	// NodePoolLabel.
	Name string
	// Labels and Annotations go onto every NodeClaim and Node of the pool
	// (spec.template.metadata): a label is how a test's pods pick the pool.
	Labels, Annotations map[string]string
	// StartupTaints are the taints Karpenter puts on a new Node and expects
	// something on the node to remove; it ignores them when it decides
	// whether pending pods fit on a node that is not initialized yet.
	StartupTaints []corev1.Taint
	// Taints are the pool's permanent taints.
	Taints []corev1.Taint
	// Consolidation is the disruption.consolidationPolicy, WhenEmpty or
	// WhenEmptyOrUnderutilized; empty means none (consolidateAfter Never).
	Consolidation string
	// ConsolidateAfter is how long a node stays consolidatable before it is
	// disrupted when Consolidation is set (default 0s).
	ConsolidateAfter time.Duration
	// TerminationGracePeriod is spec.template.spec.terminationGracePeriod:
	// how long Karpenter drains a deleted NodeClaim's Node, honouring
	// PodDisruptionBudgets, before it deletes the pods still there; zero
	// leaves it unset (drained for as long as it takes).
	TerminationGracePeriod time.Duration
}

// nodePool is the NodePool object of opts: linux/amd64 on-demand nodes of
// any KWOK instance type, with the taints, labels and disruption of opts.
func nodePool(opts NodePoolOptions) *unstructured.Unstructured {
	req := func(key, value string) map[string]any {
		return map[string]any{"key": key, "operator": "In", "values": []any{value}}
	}
	spec := map[string]any{
		"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": KarpenterNodeClass},
		"requirements": []any{
			req("kubernetes.io/arch", "amd64"), req("kubernetes.io/os", "linux"), req("karpenter.sh/capacity-type", "on-demand"),
		},
		"expireAfter": "Never",
	}
	if len(opts.StartupTaints) > 0 {
		spec["startupTaints"] = taintList(opts.StartupTaints)
	}
	if len(opts.Taints) > 0 {
		spec["taints"] = taintList(opts.Taints)
	}
	if opts.TerminationGracePeriod > 0 {
		spec["terminationGracePeriod"] = opts.TerminationGracePeriod.String()
	}
	meta := map[string]any{}
	if len(opts.Labels) > 0 {
		meta["labels"] = stringMap(opts.Labels)
	}
	if len(opts.Annotations) > 0 {
		meta["annotations"] = stringMap(opts.Annotations)
	}
	disruption := map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
	if opts.Consolidation != "" {
		disruption = map[string]any{"consolidationPolicy": opts.Consolidation, "consolidateAfter": opts.ConsolidateAfter.String()}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": opts.Name},
		"spec":     map[string]any{"template": map[string]any{"metadata": meta, "spec": spec}, "disruption": disruption},
	}}
}

func taintList(taints []corev1.Taint) []any {
	out := make([]any, len(taints))
	for i, t := range taints {
		m := map[string]any{"key": t.Key, "effect": string(t.Effect)}
		if t.Value != "" {
			m["value"] = t.Value
		}
		out[i] = m
	}
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// NewNodePool creates the NodePool of opts; an error fails tb. When the test
// ends the pool is removed with RemoveNodePool (its log lines on failure).
func (cp *ControlPlane) NewNodePool(tb testing.TB, opts NodePoolOptions) {
	tb.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := dyn.Resource(NodePools).Create(tb.Context(), nodePool(opts), metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create NodePool %s: %v", opts.Name, err)
	}
	tb.Cleanup(func() {
		if err := cp.RemoveNodePool(context.Background(), opts.Name); err != nil {
			tb.Error(err)
		}
	})
}

// RemoveNodePool removes a NodePool and everything it launched in the order
// that needs no garbage collector (none runs without
// kube-controller-manager): its limits set to zero, so Karpenter launches
// nothing more for pods still pending; its NodeClaims deleted, so Karpenter
// drains and deletes their Nodes (the webhook's cleanup runs on them) and
// terminates them; then, once they are gone, the NodePool. NodeClaims or
// Nodes still there after poolRemovalWait (Karpenter or the webhook stopped) have
// their finalizers cleared so nothing outlives the pool, and that is
// reported. A pool already gone is fine.
func (cp *ControlPlane) RemoveNodePool(ctx context.Context, name string) error {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	pools := dyn.Resource(NodePools)
	if _, err := pools.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"limits":{"cpu":"0"}}}`), metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("stop NodePool %s: %w", name, err)
	}
	var stuck error
	if err := cp.EmptyNodePool(ctx, name, poolRemovalWait); err != nil {
		stuck = fmt.Errorf("%w; finalizers cleared", err)
		cp.forceRemovePool(ctx, dyn, metav1.ListOptions{LabelSelector: NodePoolLabel + "=" + name})
	}
	if err := pools.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return errors.Join(stuck, fmt.Errorf("delete NodePool %s: %w", name, err))
	}
	return stuck
}

// EmptyNodePool deletes every NodeClaim of the NodePool name (Karpenter
// drains and terminates their Nodes) and waits up to timeout until they
// and their Nodes are gone. The pool stays, and launches again for pods
// still pending.
func (cp *ControlPlane) EmptyNodePool(ctx context.Context, name string, timeout time.Duration) error {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	sel := metav1.ListOptions{LabelSelector: NodePoolLabel + "=" + name}
	claims := dyn.Resource(NodeClaims)
	if err := claims.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return fmt.Errorf("delete NodeClaims of %s: %w", name, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	left := "not listed yet"
	err = wait.PollUntilContextCancel(waitCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := claims.List(ctx, sel)
		if err != nil {
			return false, nil
		}
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, sel)
		if err != nil {
			return false, nil
		}
		left = fmt.Sprintf("%d NodeClaims and %d Nodes left", len(list.Items), len(nodes.Items))
		return len(list.Items) == 0 && len(nodes.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("NodePool %s not emptied within %s: %s", name, timeout, left)
	}
	return nil
}

// forceRemovePool clears the finalizers of the NodeClaims and Nodes sel
// matches and deletes them.
func (cp *ControlPlane) forceRemovePool(ctx context.Context, dyn dynamic.Interface, sel metav1.ListOptions) {
	clear := []byte(`{"metadata":{"finalizers":null}}`)
	if left, err := dyn.Resource(NodeClaims).List(ctx, sel); err == nil {
		for _, c := range left.Items {
			_, _ = dyn.Resource(NodeClaims).Patch(ctx, c.GetName(), types.MergePatchType, clear, metav1.PatchOptions{})
			_ = dyn.Resource(NodeClaims).Delete(ctx, c.GetName(), metav1.DeleteOptions{})
		}
	}
	if nodes, err := cp.Client.CoreV1().Nodes().List(ctx, sel); err == nil {
		for _, n := range nodes.Items {
			_, _ = cp.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, clear, metav1.PatchOptions{})
			_ = cp.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
	}
}
