//go:build e2e

package chart_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestAgentWritesOnlyItsOwnKeys: with the chart's RBAC and policies, the
// agent's token may change on its own node exactly what the agent writes,
// and the agent's own patches (internal/agent NodePatch and ConditionPatch:
// untaint and label, re-taint, recover, a previous key removed, its
// condition) pass; ownerReferences (which would hand its node to another
// NodeClaim), finalizers, annotations, other labels and spec fields, our
// taint keys with another value or effect, and every status field but its
// own condition are denied.
func TestAgentWritesOnlyItsOwnKeys(t *testing.T) {
	ctx := t.Context()
	const ns = "privilege-agent-keys"
	node, err := cp.CreateNode(ctx, "agent-own-keys", harness.NodeOptions{
		ExtraTaints: []corev1.Taint{{Key: api.StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		Labels:      map[string]string{"team": "infra"},
	})
	if err != nil {
		t.Fatal(err)
	}
	fin := merge(`{"metadata":{"finalizers":["` + api.Finalizer + `"]}}`)
	if _, err := fin.do(ctx, cp.Client, node.Name, false); err != nil {
		t.Fatal(err)
	}
	agentClient := agentWithChartRBAC(t, ns, node.Name)
	waitForDenial(t, agentClient, node.Name, merge(`{"metadata":{"annotations":{"example.com/note":"x"}}}`))

	const (
		metadata = "may not change annotations, finalizers, ownerReferences or other node metadata"
		status   = "may change only its own KubeNodeReady condition"
		spec     = "may not change node spec fields other than its taints"
		addTaint = "may add only the taint " + "status-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule"
		label    = "may change only the node-ready/verified label"
	)
	t.Run("everything but its own keys denied", func(t *testing.T) {
		taint := func(key, value string, effect corev1.TaintEffect) nodeWrite {
			return jsonPatch(t, jsonpatch.Add("/spec/taints/-", corev1.Taint{Key: key, Value: value, Effect: effect}))
		}
		for _, tc := range []struct {
			what  string
			write nodeWrite
			want  string
		}{
			{"ownerReferences", merge(nodeClaimOwner), metadata},
			{"a foreign finalizer added", jsonPatch(t, jsonpatch.Add("/metadata/finalizers/-", "karpenter.sh/termination")), metadata},
			{"the webhook's finalizer removed", merge(`{"metadata":{"finalizers":null}}`), metadata},
			{"the protect annotation", merge(`{"metadata":{"annotations":{"` + api.ProtectAnnotation + `":"true"}}}`), metadata},
			{"the cleanup bypass annotation", merge(`{"metadata":{"annotations":{"` + api.SkipCleanupAnnotation + `":"true"}}}`), metadata},
			{"another label", merge(`{"metadata":{"labels":{"team":"web"}}}`), label},
			{"spec.unschedulable", merge(`{"spec":{"unschedulable":true}}`), spec},
			{"spec.providerID", merge(`{"spec":{"providerID":"aws:///eu-west-1a/i-0123456789"}}`), spec},
			{"the re-taint key with NoExecute", taint(harness.UnhealthyTaint.Key, "true", corev1.TaintEffectNoExecute), addTaint},
			{"the re-taint key with another value", taint(harness.UnhealthyTaint.Key, "false", corev1.TaintEffectNoSchedule), addTaint},
			{"the startup key with NoExecute", taint(harness.StartupTaint.Key, "true", corev1.TaintEffectNoExecute), addTaint},
			{"status.daemonEndpoints", mergeStatus(`{"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":10251}}}}`), status},
			{"status.nodeInfo", mergeStatus(`{"status":{"nodeInfo":{"kubeletVersion":"v9.9.9"}}}`), status},
			{"status.images", mergeStatus(`{"status":{"images":[{"names":["registry.example/evil:1"],"sizeBytes":1}]}}`), status},
			{"status.volumesInUse", mergeStatus(`{"status":{"volumesInUse":["kubernetes.io/csi/ebs.csi.aws.com^vol-1"]}}`), status},
			{"status.volumesAttached", mergeStatus(`{"status":{"volumesAttached":[{"name":"kubernetes.io/csi/ebs.csi.aws.com^vol-1","devicePath":""}]}}`), status},
			{"status.addresses", mergeStatus(`{"status":{"addresses":[{"type":"InternalIP","address":"10.213.9.9"}]}}`), status},
			{"status.capacity", mergeStatus(`{"status":{"capacity":{"cpu":"512"}}}`), status},
			{"status.allocatable", mergeStatus(`{"status":{"allocatable":{"pods":"1000"}}}`), status},
			{"another condition", mergeStatus(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`), status},
		} {
			deniedByPolicy(t, agentClient, node.Name, tc.what, tc.write, tc.want)
		}
	})

	t.Run("its own writes allowed", func(t *testing.T) {
		taints := agentTaints(t)
		apply := func(what string, want agent.Desired) {
			t.Helper()
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			patch, err := agent.NodePatch(n, api.VerifiedLabel, want)
			if err != nil || patch == nil {
				t.Fatalf("%s: patch %s, %v", what, patch, err)
			}
			if _, err := (nodeWrite{pt: types.JSONPatchType, patch: string(patch)}).do(ctx, agentClient, node.Name, false); err != nil {
				t.Errorf("the agent's %s: %v", what, err)
			}
		}
		condition := func(what string, want agent.ConditionState) {
			t.Helper()
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			patch, err := agent.ConditionPatch(n, want, time.Now())
			if err != nil || patch == nil {
				t.Fatalf("%s: patch %s, %v", what, patch, err)
			}
			if _, err := (nodeWrite{pt: types.StrategicMergePatchType, patch: string(patch), status: true}).do(ctx, agentClient, node.Name, false); err != nil {
				t.Errorf("the agent's %s: %v", what, err)
			}
		}
		modes := agent.CheckModes{Continuous: []string{"dns"}}
		condition("failing condition", agent.FailingCondition([]string{"dns"}, time.Now(), modes))
		// The startup taint and a previous key (the seed preset's) go, the label comes.
		apply("untaint", agent.Desired{Remove: []corev1.Taint{taints.Startup}, RemoveKeys: taints.PreviousStartup, Label: "true"})
		condition("passing condition", agent.PassingCondition(modes))
		apply("re-taint", agent.Desired{Add: &taints.Unhealthy, Label: "false"})
		apply("recovery", agent.Desired{Remove: []corev1.Taint{taints.Startup, taints.Unhealthy}, Label: "true"})
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Spec.Taints) != 0 || n.Labels[api.VerifiedLabel] != "true" || n.Labels["team"] != "infra" || !slices.Equal(n.Finalizers, []string{api.Finalizer}) {
			t.Errorf("after the agent's writes: taints %v, labels %v, finalizers %v", n.Spec.Taints, n.Labels, n.Finalizers)
		}
		// The startup taint, once gone, is never put back by the agent.
		deniedByPolicy(t, agentClient, node.Name, "the startup taint added back", jsonPatch(t, jsonpatch.Add("/spec/taints", []corev1.Taint{harness.StartupTaint})), addTaint)
	})
}

// agentTaints are the taints and previous keys the agent resolves with
// nothing set (the default preset's).
func agentTaints(t *testing.T) agent.Taints {
	t.Helper()
	keys, err := cli.TaintFlags{Autoscaler: api.DefaultPreset}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	startup, err := cli.ParseTaint(keys.Startup)
	if err != nil {
		t.Fatal(err)
	}
	unhealthy, err := cli.ParseTaint(keys.Unhealthy)
	if err != nil {
		t.Fatal(err)
	}
	return agent.Taints{Startup: startup, Unhealthy: unhealthy, PreviousStartup: keys.PreviousStartup, PreviousUnhealthy: keys.PreviousUnhealthy}
}
