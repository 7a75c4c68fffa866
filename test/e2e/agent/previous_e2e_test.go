//go:build e2e

package agent_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestPreviousKeysNeverStrandANode: under the default preset, and the
// chart's own-node policy rendered with the default values, a node created
// with the seed startup taint (the default of earlier releases) is verified
// and loses that taint, and a node re-tainted with the seed unhealthy taint
// recovers and loses it; everybody else's taints stay. The same agent may
// neither remove another node's previous key nor add one to its own node.
func TestPreviousKeysNeverStrandANode(t *testing.T) {
	other := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	seedUnhealthy := corev1.Taint{Key: api.UnhealthyTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	created := cp.NewNode(t, "prev-created", harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{other, harness.SeedStartupTaint}})
	retainted := cp.NewNode(t, "prev-retainted", harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{seedUnhealthy},
		Labels: map[string]string{api.VerifiedLabel: "false"}})
	stranger := cp.NewNode(t, "prev-stranger", harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{harness.SeedStartupTaint}})
	// The agent of prev-created, with its node-bound token, under the policy.
	token, err := cp.NodeToken(t.Context(), harness.AgentNamespace, agentSA, created.Name)
	if err != nil {
		t.Fatal(err)
	}
	agentClient, err := cp.TokenClient(token)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(node string, ops ...jsonpatch.Op) error {
		p, err := jsonpatch.Marshal(ops...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = agentClient.CoreV1().Nodes().Patch(t.Context(), node, types.JSONPatchType, p, metav1.PatchOptions{})
		return err
	}
	// The policy is compiled asynchronously: until it denies, put the
	// stranger's taint back and try again. Only then do the agents start,
	// so what they do is what the policy lets them do.
	removeSeed := []jsonpatch.Op{jsonpatch.Test("/spec/taints", []corev1.Taint{harness.SeedStartupTaint}), jsonpatch.Replace("/spec/taints", []corev1.Taint{})}
	harness.Eventually(t, 20*time.Second, "the own-node policy denies removing another node's previous key", func() (bool, string) {
		err := patch(stranger.Name, removeSeed...)
		if err == nil {
			restore, _ := jsonpatch.Marshal(jsonpatch.Add("/spec/taints", []corev1.Taint{harness.SeedStartupTaint}))
			if _, err := cp.Client.CoreV1().Nodes().Patch(t.Context(), stranger.Name, types.JSONPatchType, restore, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			return false, "allowed: the policy is not in force yet"
		}
		return true, err.Error()
	})
	err = patch(stranger.Name, removeSeed...)
	if err == nil || !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) || !strings.Contains(err.Error(), "may not change node "+stranger.Name) {
		t.Errorf("the agent of %s removing the seed taint of %s: %v, want denied by the policy", created.Name, stranger.Name, err)
	}

	publishPeers(t, created, retainted)
	startAgent(t, created)
	startAgent(t, retainted)

	untainted := func(n *corev1.Node) bool {
		return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return harness.OurTaint(t.Key) }) &&
			n.Labels[api.VerifiedLabel] == "true"
	}
	n := cp.WaitNode(t, created.Name, 30*time.Second, "verified, the seed startup taint removed", untainted)
	if !slices.Equal(n.Spec.Taints, []corev1.Taint{other}) {
		t.Errorf("taints after verification %v, want only %v", n.Spec.Taints, other)
	}
	cp.WaitEvent(t, 10*time.Second, "Node", created.Name, api.EventNodeVerified, api.StartupTaintKey+" removed")
	cp.WaitNode(t, retainted.Name, 30*time.Second, "recovered, the seed unhealthy taint removed", untainted)

	err = patch(created.Name, jsonpatch.Test("/spec/taints", []corev1.Taint{other}), jsonpatch.Add("/spec/taints/-", seedUnhealthy))
	if err == nil || !strings.Contains(err.Error(), "never add them") {
		t.Errorf("the agent adding a previous key to its own node: %v, want denied by the policy", err)
	}
}
