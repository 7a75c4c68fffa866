package gates

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// TestGateConfigs: each gate's configuration is on by its own flags,
// validates them in the "--flag: problem" form, and builds the gate.
func TestGateConfigs(t *testing.T) {
	t.Run("conditions", func(t *testing.T) {
		c := NewConditionsConfig()
		if c.Enabled() {
			t.Error("conditions gate on without --require-conditions")
		}
		c.Require, c.Absent = []string{"Ready=True", "Ready"}, "maybe"
		errs := c.Validate(true)
		if len(errs) != 2 || !strings.HasPrefix(errs[0].Error(), "--require-conditions: ") || !strings.HasPrefix(errs[1].Error(), "--require-conditions.absent: ") {
			t.Errorf("Validate = %v", errs)
		}
		c.Require, c.Absent = []string{"Ready=True"}, "pass"
		g, ok := c.Build(checks.Deps{}).(*Conditions)
		if !ok || !c.Enabled() || len(g.Required) != 1 || g.Required[0].String() != "Ready=True" || !g.AbsentPasses {
			t.Errorf("Build = %+v", g)
		}
	})
	t.Run("daemonsets", func(t *testing.T) {
		c := NewDaemonSetsConfig()
		if !c.Enabled() || c.Timeout != 5*time.Minute {
			t.Errorf("defaults %+v: want on, 5m", c)
		}
		c.Exclude, c.ExcludeSelector, c.Timeout = []string{"cilium"}, "a in (b", -time.Second
		errs := c.Validate(true)
		if len(errs) != 3 {
			t.Errorf("Validate = %v, want 3 problems", errs)
		}
		c.Exclude, c.ExcludeSelector, c.Timeout = []string{"kube-system/*"}, "app=cni", time.Minute
		g, ok := c.Build(checks.Deps{PodNamespace: "ns", PodName: "agent-1", AgentTaints: []string{"node-ready/unverified"}}).(*DaemonSets)
		if !ok || g.SelfPod != "ns/agent-1" || len(g.Exclude) != 1 || g.ExcludeSelector == nil || g.Timeout != time.Minute ||
			len(g.IgnoreTaints) != 1 || g.Source == nil {
			t.Errorf("Build = %+v", g)
		}
	})
}

// TestConditionsGateChanged: the loop is woken when the required
// conditions start or stop holding, not on every change of the node.
func TestConditionsGateChanged(t *testing.T) {
	g := &Conditions{Required: []ConditionRequirement{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	with := func(s corev1.ConditionStatus, reason string) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, Reason: reason}}}}
	}
	if !g.Changed(with(corev1.ConditionFalse, "a"), with(corev1.ConditionTrue, "a")) {
		t.Error("Ready False -> True not a change")
	}
	if g.Changed(with(corev1.ConditionFalse, "a"), with(corev1.ConditionUnknown, "b")) {
		t.Error("unmet -> still unmet taken as a change")
	}
}
