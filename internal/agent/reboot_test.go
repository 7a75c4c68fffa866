package agent

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

const (
	bootA = "0b1f0e2a-aaaa-4a1e-9d55-000000000001"
	bootB = "0b1f0e2a-bbbb-4a1e-9d55-000000000002"
)

// bootedNode is a verified node of ours whose condition says it was
// verified under recorded ("" records none) and whose kubelet reports
// current as its boot ID.
func bootedNode(name, recorded, current string, taints []corev1.Taint, labels, annotations map[string]string) *corev1.Node {
	n := testNode(name, taints, labels, annotations)
	n.Status.NodeInfo.BootID = current
	m := api.ConditionMessage{Summary: "all checks pass", HasModes: true, Continuous: []string{"dns"}, Boot: recorded}
	n.Status.Conditions = []corev1.NodeCondition{{Type: ConditionType, Status: corev1.ConditionTrue, Reason: api.ReasonChecksPassed, Message: m.String()}}
	return n
}

// conditionOf is the agent's condition on node and its decoded message.
func conditionOf(t *testing.T, n *corev1.Node) (corev1.NodeCondition, api.ConditionMessage) {
	t.Helper()
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionType {
			m, err := api.ParseConditionMessage(c.Message)
			if err != nil {
				t.Fatal(err)
			}
			return c, m
		}
	}
	t.Fatal("no condition of ours on the node")
	return corev1.NodeCondition{}, api.ConditionMessage{}
}

func reverify(c *Config) { c.ReverifyAfterReboot = true }

// TestRebootHoldsTheNodeUntilItVerifiesAgain: a verified node whose boot ID
// differs from the one its condition records is held with the startup
// taint and verified=false, runs the bootstrap set while its checks fail,
// is never re-tainted meanwhile, and is released, the new boot ID
// recorded, by the first round that passes.
func TestRebootHoldsTheNodeUntilItVerifiesAgain(t *testing.T) {
	f := newFakeCluster(t, bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil))
	check := &toggleCheck{err: errDNS}
	a, rec := startTestAgent(t, f, check, reverify)
	for range 5 { // past the re-taint threshold: a held node is never re-tainted
		a.step(t.Context())
	}
	n := f.node("n1")
	if !HasTaint(n.Spec.Taints, startup) || HasTaint(n.Spec.Taints, unhealthy) || n.Labels["node-ready/verified"] != "false" {
		t.Fatalf("rebooted node with failing checks: taints %v, labels %v; want held with the startup taint and verified=false", n.Spec.Taints, n.Labels)
	}
	if !RebootHeld(n, a.cfg.Taints, a.cfg.VerifiedLabel) || !BootstrapRound(n, a.cfg.Taints, a.cfg.VerifiedLabel, false) {
		t.Error("a held node is not read as held, or does not run the bootstrap set")
	}
	c, m := conditionOf(t, n)
	if c.Reason != api.ReasonRebooted || !slices.Equal(m.Failing, []string{"dns"}) || m.Boot != bootA {
		t.Errorf("condition %s %q: want %s naming the failing check, the boot verified under still %s", c.Reason, c.Message, api.ReasonRebooted, bootA)
	}
	if got := countOf(rec.got(), api.EventNodeHeldAfterReboot); got != 1 {
		t.Errorf("%d %s Events, want 1: %v", got, api.EventNodeHeldAfterReboot, rec.got())
	}
	check.err = nil
	a.step(t.Context())
	n = f.node("n1")
	if len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" {
		t.Fatalf("after a passing round: taints %v, labels %v; want released", n.Spec.Taints, n.Labels)
	}
	if c, m := conditionOf(t, n); c.Reason != api.ReasonChecksPassed || m.Boot != bootB {
		t.Errorf("condition %s %q after the release: want the new boot %s recorded", c.Reason, c.Message, bootB)
	}
	// Verified under the new boot: no more holds.
	patches := len(f.patches)
	a.step(t.Context())
	if len(f.patches) != patches {
		t.Errorf("node written again after its release: %v", f.patches[patches:])
	}
}

// TestRebootedNodeWithPassingChecksIsReleasedInItsRound: with every check
// passing, the hold and the release happen in the same round.
func TestRebootedNodeWithPassingChecksIsReleasedInItsRound(t *testing.T) {
	f := newFakeCluster(t, bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil))
	a, rec := startTestAgent(t, f, stubCheck{}, reverify)
	a.step(t.Context())
	n := f.node("n1")
	if len(f.patches) != 2 || len(n.Spec.Taints) != 0 || n.Labels["node-ready/verified"] != "true" {
		t.Fatalf("%d node patches, taints %v, labels %v: want held and released in one round", len(f.patches), n.Spec.Taints, n.Labels)
	}
	if _, m := conditionOf(t, n); m.Boot != bootB {
		t.Errorf("boot recorded %q, want %q", m.Boot, bootB)
	}
	if ev := rec.got(); !slices.Equal(ev, []string{api.EventNodeHeldAfterReboot, api.EventNodeVerified}) {
		t.Errorf("events %v", ev)
	}
}

// TestRebootHoldGates: each gate alone keeps a rebooted node from being
// held (its checks failing, so nothing else would untaint it), and says so
// where a re-taint would.
func TestRebootHoldGates(t *testing.T) {
	skip := map[string]string{"node-ready/skip-verification": "true"}
	heldOther := bootedNode("n2", bootA, bootB, []corev1.Taint{startup}, retaintedLabel, nil)
	for _, tc := range []struct {
		name      string
		node      *corev1.Node
		others    []*corev1.Node
		mutate    func(*Config)
		lease     *coordinationv1.Lease
		hooks     []func(*cluster) error
		wantEvent string
		wantBoot  string // recorded in the condition after the round
	}{
		{name: "flag off", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			mutate: func(*Config) {}},
		{name: "same boot", node: bootedNode("n1", bootB, bootB, nil, verifiedLabels, nil), wantBoot: bootB},
		{name: "no boot recorded: the current one is recorded, no hold", node: bootedNode("n1", "", bootB, nil, verifiedLabels, nil), wantBoot: bootB},
		{name: "no boot reported by the kubelet", node: bootedNode("n1", bootA, "", nil, verifiedLabels, nil), wantBoot: bootA},
		{name: "bypassed", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, skip), wantBoot: bootB},
		{name: "observe mode", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			mutate: func(c *Config) { c.ReverifyAfterReboot, c.Observe = true, true }},
		{name: "suspended", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			mutate: func(c *Config) {
				c.ReverifyAfterReboot = true
				c.Suspend = &fakeSwitch{cached: switchOn, fresh: switchOn}
			}, wantEvent: api.EventRetaintSuspended, wantBoot: bootA},
		{name: "suspend switch unreadable", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			mutate: func(c *Config) {
				c.ReverifyAfterReboot = true
				c.Suspend = &fakeSwitch{cached: suspend.State{}, fresh: switchOff}
			}, wantEvent: api.EventRetaintSuspended, wantBoot: bootA},
		{name: "suspended, seen only on the fresh read", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			mutate: func(c *Config) {
				c.ReverifyAfterReboot = true
				c.Suspend = &fakeSwitch{cached: switchOff, fresh: switchOn}
			}, wantEvent: api.EventRetaintSuspended, wantBoot: bootA},
		{name: "fleet budget used by another held node", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			others: []*corev1.Node{heldOther}, mutate: func(c *Config) {
				c.ReverifyAfterReboot = true
				c.FleetBudget = mustBudget(t, "1")
			}, wantEvent: api.EventRetaintSuppressed, wantBoot: bootA},
		{name: "re-taint Lease held by another agent", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			lease: leaseAt("n9", time.Now().Add(time.Hour), 3600), wantEvent: api.EventRetaintDeferred, wantBoot: bootA},
		{name: "bypassed between the read and the patch", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			hooks: []func(*cluster) error{func(f *cluster) error {
				n := f.stored("n1")
				n.Annotations = skip
				f.put(n)
				return nil
			}}},
		{name: "re-tainted meanwhile: not verified and in service on the version written", node: bootedNode("n1", bootA, bootB, nil, verifiedLabels, nil),
			hooks: []func(*cluster) error{func(f *cluster) error {
				n := f.stored("n1")
				n.Spec.Taints = []corev1.Taint{unhealthy}
				n.Labels = map[string]string{"node-ready/verified": "false"}
				f.put(n)
				return nil
			}}, wantBoot: bootA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, append([]*corev1.Node{tc.node}, tc.others...)...)
			if tc.lease != nil {
				f.add(tc.lease)
			}
			f.patchHooks = tc.hooks
			mutate := tc.mutate
			if mutate == nil {
				mutate = reverify
			}
			a, rec := startTestAgent(t, f, stubCheck{err: errDNS}, mutate)
			a.step(t.Context())
			n := f.node("n1")
			if HasTaint(n.Spec.Taints, startup) {
				t.Fatalf("held: taints %v, labels %v", n.Spec.Taints, n.Labels)
			}
			if tc.wantEvent != "" && countOf(rec.got(), tc.wantEvent) != 1 {
				t.Errorf("events %v, want one %s", rec.got(), tc.wantEvent)
			}
			if slices.Contains(rec.got(), api.EventNodeHeldAfterReboot) {
				t.Errorf("events %v name a hold", rec.got())
			}
			if tc.wantBoot != "" {
				if _, m := conditionOf(t, n); m.Boot != tc.wantBoot {
					t.Errorf("boot recorded %q, want %q", m.Boot, tc.wantBoot)
				}
			}
		})
	}
}

// TestHeldNodeCountsAgainstTheFleetBudget: a node held after a reboot
// (verified=false) takes a slot of the budget a re-taint needs.
func TestHeldNodeCountsAgainstTheFleetBudget(t *testing.T) {
	f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil),
		bootedNode("n2", bootA, bootB, []corev1.Taint{startup}, retaintedLabel, nil))
	a, rec := startTestAgent(t, f, stubCheck{err: errDNS}, func(c *Config) { c.FleetBudget = mustBudget(t, "1") })
	a.loop.failures = a.cfg.Thresholds.Retaint - 1
	a.loop.startupOver = true
	a.step(t.Context())
	if HasTaint(f.node("n1").Spec.Taints, unhealthy) || !slices.Contains(rec.got(), api.EventRetaintSuppressed) {
		t.Errorf("re-tainted beside a node held after a reboot with a budget of 1: %v, events %v", f.node("n1").Spec.Taints, rec.got())
	}
}

// TestNodeStateOfAHeldNode: a held node is being verified again, not
// re-tainted; a re-tainted node, or one whose unhealthy taint is the
// startup taint, is not held.
func TestNodeStateOfAHeldNode(t *testing.T) {
	taints := Taints{Startup: startup, Unhealthy: unhealthy}
	same := Taints{Startup: startup, Unhealthy: startup}
	for _, tc := range []struct {
		name                string
		node                *corev1.Node
		taints              Taints
		held, startupT, ret bool
	}{
		{"held", testNode("n", []corev1.Taint{startup}, retaintedLabel, nil), taints, true, true, false},
		{"new", testNode("n", []corev1.Taint{startup}, nil, nil), taints, false, true, false},
		{"re-tainted", testNode("n", []corev1.Taint{unhealthy}, retaintedLabel, nil), taints, false, false, true},
		{"re-tainted holding both", testNode("n", []corev1.Taint{startup, unhealthy}, retaintedLabel, nil), taints, false, false, true},
		{"re-tainted with the startup taint as unhealthy", testNode("n", []corev1.Taint{startup}, retaintedLabel, nil), same, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RebootHeld(tc.node, tc.taints, "node-ready/verified"); got != tc.held {
				t.Errorf("RebootHeld = %v, want %v", got, tc.held)
			}
			s, r := NodeState(tc.node, tc.taints, "node-ready/verified")
			if s != tc.startupT || r != tc.ret {
				t.Errorf("NodeState = %v, %v; want %v, %v", s, r, tc.startupT, tc.ret)
			}
		})
	}
}
