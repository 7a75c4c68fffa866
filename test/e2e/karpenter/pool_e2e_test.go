//go:build e2e

package karpenter

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// ourTaint is the agent's startup taint, as a NodePool declares it in
// startupTaints.
var ourTaint = corev1.Taint{Key: api.StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// agentArgs are the flags of every agent here: no pod-to-pod peers (KWOK's
// pods have no network), the other checks as shipped.
var agentArgs = []string{"--check.network.peers=0"}

// pool creates the NodePool name (its nodes labelled poolLabel=name), and,
// when agents is not nil, runs an agent with agentArgs and then agents on
// each of its nodes. Both go when the test ends, the pool first emptied.
func (e *env) pool(t *testing.T, name string, opts harness.NodePoolOptions, agents []string) *harness.NodeAgents {
	t.Helper()
	opts.Name = name
	if opts.Labels == nil {
		opts.Labels = map[string]string{}
	}
	opts.Labels[poolLabel] = name
	e.cp.NewNodePool(t, opts)
	if agents == nil {
		return nil
	}
	return e.cp.RunNodeAgents(t, harness.NodePoolLabel+"="+name, append(slices.Clone(agentArgs), agents...)...)
}

// pendingPod creates a pod in default that only a node of pool fits (a
// nodeSelector on poolLabel), requesting a little CPU and memory; it is
// deleted when the test ends (before the pool is emptied).
func (e *env) pendingPod(t *testing.T, name, pool string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{poolLabel: pool},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10.1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	created, err := e.cp.Client.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.deletePod(t, name) })
	return created
}

// deletePod deletes a pod at once (KWOK removes it); gone already is fine.
func (e *env) deletePod(t *testing.T, name string) {
	t.Helper()
	err := e.cp.Client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete pod %s: %v", name, err)
	}
}

// pod reads a pod of default; nil when it is not there.
func (e *env) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := e.cp.Client.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// claims lists the NodeClaims of pool.
func (e *env) claims(t *testing.T, pool string) []unstructured.Unstructured {
	t.Helper()
	list, err := e.dyn.Resource(harness.NodeClaims).List(t.Context(), metav1.ListOptions{LabelSelector: harness.NodePoolLabel + "=" + pool})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// live are the claims not being deleted.
func live(claims []unstructured.Unstructured) []unstructured.Unstructured {
	return slices.DeleteFunc(slices.Clone(claims), func(c unstructured.Unstructured) bool { return c.GetDeletionTimestamp() != nil })
}

// claimProviderNode is the name of the Node a NodeClaim launched, known
// from its providerID as soon as it is launched ("" before): the KWOK
// provider's instance is the Node, kwok://<node name>.
func claimProviderNode(c unstructured.Unstructured) string {
	id, _, _ := unstructured.NestedString(c.Object, "status", "providerID")
	n, _ := strings.CutPrefix(id, "kwok://")
	return n
}

// claimCondition reports whether the NodeClaim's condition typ is True.
func claimCondition(c unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, raw := range conds {
		if m, ok := raw.(map[string]any); ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// hasTaint reports whether the node carries a taint with key.
func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// node reads a node; nil when it is not there (or name is "": a NodeClaim
// not launched yet).
func (e *env) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	if name == "" {
		return nil
	}
	n, err := e.cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// emptyPool deletes every NodeClaim of pool and waits until they and their
// Nodes are gone, so the next run starts from no node.
func (e *env) emptyPool(t *testing.T, pool string) {
	t.Helper()
	if err := e.cp.EmptyNodePool(t.Context(), pool, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// median of durations (the upper middle one of an even count).
func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
