package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// settableCheck is a check of a given name that fails while *err is set.
type settableCheck struct {
	name string
	err  *error
}

func (c settableCheck) Name() string              { return c.name }
func (c settableCheck) Run(context.Context) error { return *c.err }

// ruleTaint is a NodeReadinessRule's taint: the controller's, never ours to write.
var ruleTaint = corev1.Taint{Key: "readiness.k8s.io/node-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}

func publishMode(perCheck bool) func(*Config) {
	return func(c *Config) { c.Publish, c.PublishPerCheck = true, perCheck }
}

// conditionsOf are node's conditions of the agent's, by type.
func conditionsOf(n *corev1.Node) map[corev1.NodeConditionType]corev1.NodeCondition {
	out := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range n.Status.Conditions {
		out[c.Type] = c
	}
	return out
}

// TestPublishVerifiesANewNodeByItsConditions: a new node (the rule's taint
// on it, no label) runs every check until a round passes: its condition is
// False/Verifying, with per-check conditions False for the failing check
// and True for the passing one; the pass sets them True and the label
// "true". The rule's taint is never touched, and no taint is written.
func TestPublishVerifiesANewNodeByItsConditions(t *testing.T) {
	var dnsErr, apiErr error = errDNS, nil
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{ruleTaint}, nil, nil))
	a, rec := startTestAgentWith(t, f, []checks.Check{settableCheck{"dns", &dnsErr}, settableCheck{"api", &apiErr}}, func(c *Config) {
		publishMode(true)(c)
		c.Taints.Startup = ruleTaint // the karpenter preset's key: the rule adopts it
		c.Continuous = []string{"dns"}
	})
	a.step(t.Context())
	a.step(t.Context())
	n := f.node("n1")
	conds := conditionsOf(n)
	if c := conds[ConditionType]; c.Status != corev1.ConditionFalse || c.Reason != api.ReasonVerifying {
		t.Fatalf("condition %s/%s, want False/%s", c.Status, c.Reason, api.ReasonVerifying)
	}
	if c := conds[CheckConditionType("dns")]; c.Status != corev1.ConditionFalse || c.Reason != api.ReasonCheckFailing {
		t.Errorf("node-ready/dns %s/%s, want False/%s", c.Status, c.Reason, api.ReasonCheckFailing)
	}
	if c := conds[CheckConditionType("api")]; c.Status != corev1.ConditionTrue {
		t.Errorf("node-ready/api %s/%s, want True: that check passes", c.Status, c.Reason)
	}
	if !slices.Equal(n.Spec.Taints, []corev1.Taint{ruleTaint}) || n.Labels["node-ready/verified"] != "" {
		t.Fatalf("taints %v, labels %v; want the rule's taint alone and no label", n.Spec.Taints, n.Labels)
	}
	dnsErr = nil
	a.step(t.Context())
	n = f.node("n1")
	conds = conditionsOf(n)
	for _, typ := range []corev1.NodeConditionType{ConditionType, CheckConditionType("dns"), CheckConditionType("api")} {
		if conds[typ].Status != corev1.ConditionTrue {
			t.Errorf("%s %s/%s after the pass, want True", typ, conds[typ].Status, conds[typ].Reason)
		}
	}
	if !slices.Equal(n.Spec.Taints, []corev1.Taint{ruleTaint}) || n.Labels["node-ready/verified"] != "true" {
		t.Errorf("taints %v, labels %v; want the rule's taint left for the controller and verified=true", n.Spec.Taints, n.Labels)
	}
	if !slices.Contains(rec.got(), api.EventNodeVerified) {
		t.Errorf("events %v, want %s", rec.got(), api.EventNodeVerified)
	}
	for _, op := range []string{"add", "remove"} {
		if got := testutil.ToFloat64(a.metrics.taintOps.WithLabelValues(op, "success")); got != 0 {
			t.Errorf("%v taint %s operations in publish mode", got, op)
		}
	}
	if got := testutil.ToFloat64(a.metrics.observe.mode.WithLabelValues(api.ModePublish)); got != 1 {
		t.Errorf("node_ready_mode{mode=publish} = %v, want 1", got)
	}
}

// TestPublishReportsAFailingNodeAsEnforceWouldRetaint: a verified node's
// condition stays True until --retaint-threshold rounds failed, then goes
// False (Event NodeConditionFalse); it is True again after
// --recover-threshold passes. No taint is written at any point, and the
// suspend switch keeps the condition True.
func TestPublishReportsAFailingNodeAsEnforceWouldRetaint(t *testing.T) {
	t.Run("threshold and recovery", func(t *testing.T) {
		f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
		check := &toggleCheck{}
		a, rec := startTestAgent(t, f, check, publishMode(false))
		a.loop.startupOver = true
		a.step(t.Context())
		check.err = errDNS
		for i := range a.cfg.Thresholds.Retaint {
			if c := conditionsOf(f.node("n1"))[ConditionType]; c.Status != corev1.ConditionTrue {
				t.Fatalf("after %d failed rounds: condition %s/%s, want True below the threshold", i, c.Status, c.Reason)
			}
			a.step(t.Context())
		}
		if c := conditionsOf(f.node("n1"))[ConditionType]; c.Status != corev1.ConditionFalse || c.Reason != api.ReasonChecksFailing {
			t.Fatalf("condition %s/%s at the threshold, want False/%s", c.Status, c.Reason, api.ReasonChecksFailing)
		}
		if countOf(rec.got(), api.EventNodeConditionFalse) != 1 {
			t.Errorf("events %v, want one %s", rec.got(), api.EventNodeConditionFalse)
		}
		if f.lease() != nil {
			t.Error("the re-taint Lease was taken: publish mode taints nothing")
		}
		check.err = nil
		a.step(t.Context())
		if c := conditionsOf(f.node("n1"))[ConditionType]; c.Reason != api.ReasonRecovering {
			t.Errorf("condition %s/%s after one pass, want False/%s", c.Status, c.Reason, api.ReasonRecovering)
		}
		a.step(t.Context())
		if c := conditionsOf(f.node("n1"))[ConditionType]; c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s/%s after %d passes, want True", c.Status, c.Reason, a.cfg.Thresholds.Recover)
		}
		if n := f.node("n1"); len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" {
			t.Errorf("taints %v, labels %v; want none and the label left true", n.Spec.Taints, n.Labels)
		}
		if got := testutil.ToFloat64(a.metrics.taintOps.WithLabelValues("add", "success")); got != 0 {
			t.Errorf("%v taints added in publish mode", got)
		}
	})
	t.Run("suspended", func(t *testing.T) {
		f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
		check := &toggleCheck{}
		a, rec := startTestAgent(t, f, check, func(c *Config) {
			publishMode(false)(c)
			c.Suspend = &fakeSwitch{cached: switchOff, fresh: switchOn}
		})
		a.loop.startupOver = true
		a.step(t.Context())
		check.err = errDNS
		for range a.cfg.Thresholds.Retaint + 1 {
			a.step(t.Context())
		}
		if c := conditionsOf(f.node("n1"))[ConditionType]; c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s/%s while suspended, want True: the switch holds it as it holds a re-taint", c.Status, c.Reason)
		}
		if countOf(rec.got(), api.EventRetaintSuspended) != 1 {
			t.Errorf("events %v, want one %s", rec.got(), api.EventRetaintSuspended)
		}
	})
}

// TestPublishRemovesOnlyTaintsNoRuleCanOwn: a node switched from enforce
// carries the unhealthy taint (outside readiness.k8s.io/), verified=false,
// and the rule's taint: publish mode removes the first two at once and
// never the rule's.
func TestPublishRemovesOnlyTaintsNoRuleCanOwn(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{ruleTaint, unhealthy}, retaintedLabel, nil))
	a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, func(c *Config) {
		publishMode(false)(c)
		c.Taints.Startup = ruleTaint
	})
	for range 3 {
		a.step(t.Context())
	}
	n := f.node("n1")
	if !slices.Equal(n.Spec.Taints, []corev1.Taint{ruleTaint}) || n.Labels["node-ready/verified"] != "" {
		t.Fatalf("taints %v, labels %v; want the rule's taint alone, no label", n.Spec.Taints, n.Labels)
	}
	if c := conditionsOf(n)[ConditionType]; c.Reason != api.ReasonVerifying {
		t.Errorf("condition %s/%s, want %s: a node without the label verifies again", c.Status, c.Reason, api.ReasonVerifying)
	}
}

// TestPublishBypassWritesTheConditionOnly: the bypass annotation makes the
// condition True/Bypassed; the rule's taint stays for the controller.
func TestPublishBypassWritesTheConditionOnly(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", []corev1.Taint{ruleTaint}, nil, map[string]string{"node-ready/skip-verification": "true"}))
	a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, func(c *Config) {
		publishMode(true)(c)
		c.Taints.Startup = ruleTaint
	})
	a.step(t.Context())
	n := f.node("n1")
	conds := conditionsOf(n)
	if c := conds[ConditionType]; c.Status != corev1.ConditionTrue || c.Reason != api.ReasonBypassed {
		t.Errorf("condition %s/%s, want True/%s", c.Status, c.Reason, api.ReasonBypassed)
	}
	if c := conds[CheckConditionType("dns")]; c.Status != corev1.ConditionTrue {
		t.Errorf("node-ready/dns %s/%s, want True", c.Status, c.Reason)
	}
	if !slices.Equal(n.Spec.Taints, []corev1.Taint{ruleTaint}) || len(f.patches) != 0 {
		t.Errorf("taints %v, node patches %v; want the rule's taint and no node patch", n.Spec.Taints, f.patches)
	}
}
