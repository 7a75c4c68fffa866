//go:build e2e

package nrc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/test/e2e/agentkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// satisfied reports whether node meets rule's conditions as the controller
// evaluates them (v0.5.0, allOf): each named condition has its required
// status, a missing one counting as its defaultStatus (Unknown unset).
func satisfied(r rule, n *corev1.Node) bool {
	for _, want := range r.Spec.Conditions {
		got := want.DefaultStatus
		if got == "" {
			got = corev1.ConditionUnknown
		}
		for _, c := range n.Status.Conditions {
			if string(c.Type) == want.Type {
				got = c.Status
			}
		}
		if got != want.RequiredStatus {
			return false
		}
	}
	return true
}

// ruleTaints are the documented rules' taints: what the controller puts on
// a node at its first reconcile (it reports no condition yet).
func ruleTaints(rules map[string]rule) []corev1.Taint {
	return []corev1.Taint{rules["one"].Spec.Taint, rules["per-check"].Spec.Taint}
}

// TestPublishModeUnderTheDocumentedRules runs the real agent in publish
// mode with per-check conditions, under the chart's RBAC and policies, on
// two nodes that carry the documented rules' taints as the controller puts
// them on new nodes: both rules become satisfied on both nodes; when one
// node's DNS breaks, past --retaint-threshold, the rule naming KubeNodeReady
// and the one naming node-ready/dns are no longer satisfied there (and
// still are on the other node); DNS fixed, they are again. No agent adds,
// removes or changes a taint at any point.
func TestPublishModeUnderTheDocumentedRules(t *testing.T) {
	rules := documentedRules(t)
	taints := ruleTaints(rules)
	var nodes []harness.Node
	for _, name := range []string{"publish-a", "publish-b"} {
		nodes = append(nodes, cp.NewNode(t, name, harness.NodeOptions{NoStartupTaint: true, ExtraTaints: taints}))
	}
	kit.PublishPeers(t, nodes...)
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	original, err := os.ReadFile(cp.ResolvConf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(resolv, original, 0o644); err != nil {
		t.Fatal(err)
	}
	var agents []*agentkit.Agent
	for i, n := range nodes {
		args := []string{"--mode=publish", "--publish-conditions=per-check", "--retaint-threshold=3", "--recover-threshold=2", "--fleet-budget=100%"}
		if i == 0 {
			args = append(args, "--check.dns.resolv-conf="+resolv)
		}
		agents = append(agents, kit.StartAgent(t, n, args...))
	}
	untouched := func() (bool, string) {
		for _, n := range nodes {
			if got := cp.GetNode(t, n.Name).Spec.Taints; !reflect.DeepEqual(got, taints) {
				return false, fmt.Sprintf("node %s: taints %v, want the rules' %v untouched", n.Name, got, taints)
			}
		}
		return true, ""
	}
	bothRules := func(want bool) func(*corev1.Node) bool {
		return func(n *corev1.Node) bool {
			return satisfied(rules["one"], n) == want && satisfied(rules["per-check"], n) == want
		}
	}
	for _, n := range nodes {
		got := cp.WaitNode(t, n.Name, 30*time.Second, "both documented rules satisfied", bothRules(true))
		if got.Labels[api.VerifiedLabel] != "true" {
			t.Errorf("node %s verified: label %q, want true", n.Name, got.Labels[api.VerifiedLabel])
		}
	}
	if ok, why := untouched(); !ok {
		t.Fatal(why)
	}

	if err := os.WriteFile(resolv, []byte("nameserver 10.213.0.250\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := cp.WaitNode(t, nodes[0].Name, 60*time.Second, "neither rule satisfied once its DNS broke", bothRules(false))
	for _, c := range a.Status.Conditions {
		switch string(c.Type) {
		case api.ConditionType:
			if c.Reason != api.ReasonChecksFailing {
				t.Errorf("KubeNodeReady %s/%s, want False/%s", c.Status, c.Reason, api.ReasonChecksFailing)
			}
		case api.CheckConditionPrefix + "network", api.CheckConditionPrefix + "api":
			if c.Status != corev1.ConditionTrue {
				t.Errorf("%s %s/%s, want True: that check passes", c.Type, c.Status, c.Reason)
			}
		}
	}
	if b := cp.GetNode(t, nodes[1].Name); !bothRules(true)(b) {
		t.Errorf("node %s, whose DNS works, no longer satisfies the rules: %v", b.Name, b.Status.Conditions)
	}
	cp.WaitEvent(t, 5*time.Second, "Node", nodes[0].Name, api.EventNodeConditionFalse, "")
	// Anchored on rounds run past the threshold on both agents, the taints
	// untouched all along.
	harness.WaitCounters(t, agentkit.Daemons(agents), agentkit.Iterations, 4, "rounds past --retaint-threshold", untouched)

	if err := os.WriteFile(resolv, original, 0o644); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, nodes[0].Name, 60*time.Second, "both rules satisfied again once DNS was fixed", bothRules(true))
	if ok, why := untouched(); !ok {
		t.Fatal(why)
	}
	for _, ag := range agents {
		for _, op := range []string{"add", "remove"} {
			if got := ag.Metric(t, "node_ready_taint_operations_total", `operation="`+op+`"`); got != 0 {
				t.Errorf("agent of %s: %v taint %s operations in publish mode", ag.Node.Name, got, op)
			}
		}
		if got := ag.Metric(t, "node_ready_mode", `mode="publish"`); got != 1 {
			t.Errorf("agent of %s: node_ready_mode{mode=publish} = %v", ag.Node.Name, got)
		}
	}
}

// nodeWrite is one write the agent's token tries on its node.
type nodeWrite struct {
	what, patch string
	pt          types.PatchType
	status      bool
}

func (w nodeWrite) do(ctx context.Context, t *testing.T, node, token string) error {
	c, err := cp.TokenClient(token)
	if err != nil {
		t.Fatal(err)
	}
	var sub []string
	if w.status {
		sub = []string{"status"}
	}
	_, err = c.CoreV1().Nodes().Patch(ctx, node, w.pt, []byte(w.patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, sub...)
	return err
}

func jsonPatchOf(t *testing.T, ops ...jsonpatch.Op) string {
	t.Helper()
	b, err := jsonpatch.Marshal(ops...)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPublishModePolicyAllowsOnlyConditions: the agent's own-node policy as
// the chart renders it for publish mode with per-check conditions, against
// the agent's token bound to its node: it may write its conditions and the
// label "true", and remove a taint of ours outside readiness.k8s.io/; it may
// not add any taint (not even its re-taint taint), remove or change a
// rule's taint, or write verified=false.
func TestPublishModePolicyAllowsOnlyConditions(t *testing.T) {
	rules := documentedRules(t)
	// The rules' taints, and our startup taint (outside readiness.k8s.io/),
	// as enforce or a kubelet flag leaves it.
	taints := append(ruleTaints(rules), harness.StartupTaint)
	n := cp.NewNode(t, "publish-policy", harness.NodeOptions{NoStartupTaint: true, ExtraTaints: taints})
	token, err := cp.NodeToken(t.Context(), harness.AgentNamespace, harness.AgentServiceAccount, n.Name)
	if err != nil {
		t.Fatal(err)
	}
	cond := func(typ string, status corev1.ConditionStatus) string {
		b, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
			Type: corev1.NodeConditionType(typ), Status: status, Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}}})
		return string(b)
	}
	withTaints := func(ts ...corev1.Taint) string {
		return jsonPatchOf(t, jsonpatch.Test("/spec/taints", taints), jsonpatch.Replace("/spec/taints", ts))
	}
	allowed := []nodeWrite{
		{what: "its KubeNodeReady condition", patch: cond(api.ConditionType, corev1.ConditionTrue), pt: types.StrategicMergePatchType, status: true},
		{what: "its node-ready/dns condition", patch: cond(api.CheckConditionPrefix+"dns", corev1.ConditionFalse), pt: types.StrategicMergePatchType, status: true},
		{what: "the label true", patch: `{"metadata":{"labels":{"` + api.VerifiedLabel + `":"true"}}}`, pt: types.MergePatchType},
		{what: "its startup taint removed (outside readiness.k8s.io/)", patch: withTaints(taints[0], taints[1]), pt: types.JSONPatchType},
	}
	denied := []nodeWrite{
		{what: "its re-taint taint added (enforce's policy allows it)", patch: jsonPatchOf(t, jsonpatch.Add("/spec/taints/-", harness.UnhealthyTaint)), pt: types.JSONPatchType},
		{what: "a rule's taint removed", patch: withTaints(taints[1], taints[2]), pt: types.JSONPatchType},
		{what: "a rule's taint changed", patch: withTaints(corev1.Taint{Key: taints[0].Key, Value: "false", Effect: taints[0].Effect}, taints[1], taints[2]), pt: types.JSONPatchType},
		{what: "the label false (enforce's policy allows it)", patch: `{"metadata":{"labels":{"` + api.VerifiedLabel + `":"false"}}}`, pt: types.MergePatchType},
		{what: "another condition", patch: cond("Ready", corev1.ConditionFalse), pt: types.StrategicMergePatchType, status: true},
	}
	// The policy is in force once a write it denies is denied.
	harness.WaitFor(t, 20*time.Second, "the agent's policy in force", func() bool {
		err := denied[0].do(context.Background(), t, n.Name, token)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
	})
	for _, w := range allowed {
		if err := w.do(t.Context(), t, n.Name, token); err != nil {
			t.Errorf("%s: %v, want allowed", w.what, err)
		}
	}
	for _, w := range denied {
		err := w.do(t.Context(), t, n.Name, token)
		if err == nil || !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			t.Errorf("%s: %v, want denied by the agent's ValidatingAdmissionPolicy", w.what, err)
		}
	}
}
