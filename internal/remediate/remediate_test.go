package remediate

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
)

func TestConditionTypeIsTheAgents(t *testing.T) {
	if ConditionType != agent.ConditionType {
		t.Fatalf("ConditionType %q, the agent writes %q", ConditionType, agent.ConditionType)
	}
}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

type nodeOpt func(*corev1.Node)

func node(name string, created time.Duration, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-created)),
		Labels: map[string]string{}, Annotations: map[string]string{},
	}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func taint(key string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
}

func failingSince(ago time.Duration) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: ConditionType, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-ago)),
		})
	}
}

func label(k, v string) nodeOpt      { return func(n *corev1.Node) { n.Labels[k] = v } }
func annotation(k, v string) nodeOpt { return func(n *corev1.Node) { n.Annotations[k] = v } }
func deleting() nodeOpt {
	return func(n *corev1.Node) { ts := metav1.NewTime(t0); n.DeletionTimestamp = &ts }
}

const (
	startup   = "node-ready/unverified"
	unhealthy = "node-ready/unhealthy"
)

func testController(t *testing.T, policy Policy, maxReplacing, fleet string, dryRun bool) *Controller {
	t.Helper()
	mr, err := budget.Parse(maxReplacing)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := budget.Parse(fleet)
	if err != nil {
		t.Fatal(err)
	}
	return &Controller{
		cfg: Config{
			Policy: policy, Deadline: 30 * time.Minute, MaxReplacing: mr, FleetBudget: fb, DryRun: dryRun,
			StartupTaint: startup, UnhealthyTaint: unhealthy, VerifiedLabel: "node-ready/verified",
			ReplacingAnnotation: "infra.894.io/replacing", ProtectAnnotation: "infra.894.io/protect",
		},
		log: slog.New(slog.DiscardHandler), now: func() time.Time { return t0 },
		noted: map[types.UID]string{}, taintedSeen: map[types.UID]time.Time{},
	}
}

func names(os []Overdue) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.Node.Name)
	}
	return out
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name         string
		policy       Policy
		maxReplacing string
		fleet        string
		dryRun       bool
		total        int
		nodes        []*corev1.Node
		wantOverdue  []string
		wantReplace  []string
		wantBlocked  map[string]string
		wantInFlight int
	}{
		{
			name:   "startup taint younger than the deadline is left alone",
			policy: PolicyReplace, nodes: []*corev1.Node{node("young", 29*time.Minute, taint(startup))},
		},
		{
			name:   "startup taint past the deadline is replaced",
			policy: PolicyReplace, nodes: []*corev1.Node{node("old", 31*time.Minute, taint(startup))},
			wantOverdue: []string{"old"}, wantReplace: []string{"old"},
		},
		{
			name:   "report never replaces",
			policy: PolicyReport, nodes: []*corev1.Node{node("old", time.Hour, taint(startup))},
			wantOverdue: []string{"old"},
		},
		{
			name:   "no taint, no label: an agent-less node is not ours to judge",
			policy: PolicyReplace, nodes: []*corev1.Node{node("plain", 10*time.Hour)},
		},
		{
			name:   "unhealthy taint dated by the agent's condition, not the node's age",
			policy: PolicyReplace,
			nodes: []*corev1.Node{
				node("recent", 10*time.Hour, taint(unhealthy), label("node-ready/verified", "false"), failingSince(5*time.Minute)),
				node("long", 10*time.Hour, taint(unhealthy), label("node-ready/verified", "false"), failingSince(40*time.Minute)),
			},
			total:       100,
			wantOverdue: []string{"long"}, wantReplace: []string{"long"},
		},
		{
			name:   "unhealthy taint without a condition starts counting when first seen",
			policy: PolicyReplace, nodes: []*corev1.Node{node("nocond", 10*time.Hour, taint(unhealthy))},
		},
		{
			name:   "oldest first, up to --max-replacing",
			policy: PolicyReplace, maxReplacing: "2", total: 10,
			nodes: []*corev1.Node{
				node("c", 40*time.Minute, taint(startup)), node("a", 60*time.Minute, taint(startup)), node("b", 50*time.Minute, taint(startup)),
			},
			wantOverdue: []string{"a", "b", "c"}, wantReplace: []string{"a", "b"}, wantBlocked: map[string]string{"c": "max_replacing"},
		},
		{
			name:   "nodes still going away use the budget",
			policy: PolicyReplace, total: 10,
			nodes: []*corev1.Node{
				node("gone1", time.Hour, taint(startup), annotation("infra.894.io/replacing", "t")),
				node("next", time.Hour, taint(startup)),
			},
			wantOverdue: []string{"next"}, wantBlocked: map[string]string{"next": "max_replacing"}, wantInFlight: 1,
		},
		{
			name:   "a node being deleted by anyone counts as going away",
			policy: PolicyReplace, total: 10,
			nodes: []*corev1.Node{
				node("deleting", time.Hour, taint(startup), deleting()),
				node("next", time.Hour, taint(startup)),
			},
			wantOverdue: []string{"next"}, wantBlocked: map[string]string{"next": "max_replacing"}, wantInFlight: 1,
		},
		{
			name:   "percentage budget",
			policy: PolicyReplace, maxReplacing: "20%", total: 10,
			nodes: []*corev1.Node{
				node("a", 3*time.Hour, taint(startup)), node("b", 2*time.Hour, taint(startup)), node("c", time.Hour, taint(startup)),
			},
			wantOverdue: []string{"a", "b", "c"}, wantReplace: []string{"a", "b"}, wantBlocked: map[string]string{"c": "max_replacing"},
		},
		{
			name:   "fleet budget used up: nothing is replaced",
			policy: PolicyReplace, fleet: "2", total: 20,
			nodes: []*corev1.Node{
				node("r1", 10*time.Hour, taint(unhealthy), label("node-ready/verified", "false"), failingSince(5*time.Minute)),
				node("r2", 10*time.Hour, taint(unhealthy), label("node-ready/verified", "false"), failingSince(5*time.Minute)),
				node("new", time.Hour, taint(startup)),
			},
			wantOverdue: []string{"new"}, wantBlocked: map[string]string{"new": "fleet_budget"},
		},
		{
			name:   "one below the fleet budget still replaces",
			policy: PolicyReplace, fleet: "2", total: 20,
			nodes: []*corev1.Node{
				node("r1", 10*time.Hour, taint(unhealthy), label("node-ready/verified", "false"), failingSince(5*time.Minute)),
				node("new", time.Hour, taint(startup)),
			},
			wantOverdue: []string{"new"}, wantReplace: []string{"new"},
		},
		{
			name:   "protected nodes are never replaced",
			policy: PolicyReplace, total: 10,
			nodes:       []*corev1.Node{node("p", time.Hour, taint(startup), annotation("infra.894.io/protect", "true"))},
			wantOverdue: []string{"p"}, wantBlocked: map[string]string{"p": "protected"},
		},
		{
			name:   "dry run reports every overdue node, using no budget",
			policy: PolicyReplace, dryRun: true, total: 10,
			nodes: []*corev1.Node{
				node("a", 2*time.Hour, taint(startup)), node("b", time.Hour, taint(startup)),
			},
			wantOverdue: []string{"a", "b"}, wantReplace: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mr, fleet := tt.maxReplacing, tt.fleet
			if mr == "" {
				mr = "1"
			}
			if fleet == "" {
				fleet = "10%"
			}
			c := testController(t, tt.policy, mr, fleet, tt.dryRun)
			total := tt.total
			if total == 0 {
				total = len(tt.nodes)
			}
			p := c.plan(tt.nodes, total, t0)
			if got := names(p.Overdue); !slices.Equal(got, tt.wantOverdue) {
				t.Errorf("overdue %v, want %v", got, tt.wantOverdue)
			}
			if got := names(p.Replace); !slices.Equal(got, tt.wantReplace) {
				t.Errorf("replace %v, want %v", got, tt.wantReplace)
			}
			if len(p.Blocked) != len(tt.wantBlocked) {
				t.Errorf("blocked %v, want %v", p.Blocked, tt.wantBlocked)
			}
			for n, r := range tt.wantBlocked {
				if p.Blocked[n] != r {
					t.Errorf("blocked[%s] = %q, want %q", n, p.Blocked[n], r)
				}
			}
			if p.Replacing != tt.wantInFlight {
				t.Errorf("replacing %d, want %d", p.Replacing, tt.wantInFlight)
			}
		})
	}
}

// An unhealthy taint without a dating condition becomes overdue a deadline
// after this replica first saw it, and the memory goes with the node.
func TestUnhealthyWithoutConditionCountsFromFirstSight(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "50%", false)
	n := node("nocond", 10*time.Hour, taint(unhealthy))
	if p := c.plan([]*corev1.Node{n}, 10, t0); len(p.Overdue) != 0 {
		t.Fatalf("overdue at first sight: %v", names(p.Overdue))
	}
	if p := c.plan([]*corev1.Node{n}, 10, t0.Add(31*time.Minute)); len(p.Overdue) != 1 {
		t.Fatalf("not overdue a deadline after first sight")
	}
	c.plan(nil, 10, t0.Add(32*time.Minute))
	if len(c.taintedSeen) != 0 {
		t.Fatalf("first-sight memory kept for a node that is gone: %v", c.taintedSeen)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, ok := range []string{"off", "report", "replace"} {
		if _, err := ParsePolicy(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "delete", "Replace"} {
		if _, err := ParsePolicy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Agents that re-taint with the startup taint (retaintTaint = startupTaint):
// a re-tainted node is dated by its condition, not by its creation.
func TestRetaintWithTheStartupTaintIsDatedByTheCondition(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "50%", false)
	recent := node("recent", 10*24*time.Hour, taint(startup), label("node-ready/verified", "false"), failingSince(5*time.Minute))
	long := node("long", 10*24*time.Hour, taint(startup), label("node-ready/verified", "false"), failingSince(time.Hour))
	p := c.plan([]*corev1.Node{recent, long}, 10, t0)
	if got := names(p.Overdue); !slices.Equal(got, []string{"long"}) {
		t.Errorf("overdue %v, want [long]: a node re-tainted 5 minutes ago is not 10 days overdue", got)
	}
}

// In a small cluster the fleet budget is 1: the one re-tainted node does not
// hold back its own replacement, but does hold back another's.
func TestOwnRetaintDoesNotHoldItself(t *testing.T) {
	c := testController(t, PolicyReplace, "2", "10%", false)
	sick := node("sick", 10*time.Hour, taint(unhealthy), label("node-ready/verified", "false"), failingSince(time.Hour))
	if p := c.plan([]*corev1.Node{sick}, 5, t0); !slices.Equal(names(p.Replace), []string{"sick"}) {
		t.Errorf("replace %v, blocked %v: want the only re-tainted node replaced", names(p.Replace), p.Blocked)
	}
	fresh := node("fresh", time.Hour, taint(startup))
	p := c.plan([]*corev1.Node{sick, fresh}, 5, t0)
	if p.Blocked["fresh"] != "fleet_budget" || !slices.Contains(names(p.Replace), "sick") {
		t.Errorf("replace %v, blocked %v: want fresh held by the fleet budget, sick replaced", names(p.Replace), p.Blocked)
	}
}

// A node marked as replacing but never deleted (the delete failed, or the
// leader stopped in between) is tried again once the mark is old, not
// before, and not again right after.
func TestStalledReplacementIsRetried(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "10%", false)
	c.cfg.Interval = 30 * time.Second
	c.retried = map[types.UID]time.Time{}
	old := node("old", time.Hour, taint(startup), annotation("infra.894.io/replacing", t0.Add(-2*time.Minute).Format(time.RFC3339)))
	recent := node("recent", time.Hour, taint(startup), annotation("infra.894.io/replacing", t0.Add(-10*time.Second).Format(time.RFC3339)))
	going := node("going", time.Hour, taint(startup), annotation("infra.894.io/replacing", t0.Add(-time.Hour).Format(time.RFC3339)), deleting())
	p := c.plan([]*corev1.Node{old, recent, going}, 10, t0)
	var stalled []string
	for _, n := range p.Stalled {
		stalled = append(stalled, n.Name)
	}
	if !slices.Equal(stalled, []string{"old"}) || p.Replacing != 3 {
		t.Errorf("stalled %v, replacing %d: want [old] and all three counted", stalled, p.Replacing)
	}
	c.retried[old.UID] = t0
	if p := c.plan([]*corev1.Node{old}, 10, t0.Add(10*time.Second)); len(p.Stalled) != 0 {
		t.Error("retried again 10 s after the last retry")
	}
}
