package remediate

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/budget"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

type nodeOpt func(*corev1.Node)

// node is a new Node object created ago, with a UID of its own: two calls
// with the same name are two incarnations of that name, as on a cluster
// (marks are bound to a UID, so tests must not share one).
func node(name string, created time.Duration, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, UID: uuid.NewUUID(), CreationTimestamp: metav1.NewTime(t0.Add(-created)),
		Labels: map[string]string{}, Annotations: map[string]string{},
	}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// recreated is n deleted and created again under its name: the same
// labels, taints and annotations (a mark included), another UID.
func recreated(n *corev1.Node) *corev1.Node {
	again := n.DeepCopy()
	again.UID = uuid.NewUUID()
	again.ResourceVersion = ""
	return again
}

func taint(key string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
}

// failingSince gives n the agent's condition False since ago: written by
// the node's own clock, which remediation must not read.
func failingSince(ago time.Duration) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: "KubeNodeReady", Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-ago)),
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

func testController(t testing.TB, policy Policy, maxReplacing, fleet string, dryRun bool) *Controller {
	t.Helper()
	mr, err := budget.Parse(maxReplacing)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := budget.Parse(fleet)
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{
		cfg: Config{
			Policy: policy, Deadline: 30 * time.Minute, MaxReplacing: mr, FleetBudget: fb, DryRun: dryRun,
			StartupTaints: []string{startup}, UnhealthyTaints: []string{unhealthy}, VerifiedLabel: "node-ready/verified",
			ReplacingAnnotation: "infra.894.io/replacing", ProtectAnnotation: "infra.894.io/protect",
			AgentSkipAnnotation: "node-ready/skip-verification", Interval: 30 * time.Second, StallAfter: 30 * time.Second,
		},
		log: slog.New(slog.DiscardHandler), clock: clocktesting.NewFakeClock(t0),
		noted: map[types.UID]string{}, retried: map[types.UID]time.Time{},
	}
	c.obs = newObserver(c, t0.Add(-1000*time.Hour))
	c.brks = newBreakers(Breaker{})
	return c
}

// watched has c observe each node at its creation, as a replica that led
// all along would have (the tests' way of saying "first seen then"). It
// returns the nodes as the informer caches them (trimmed by c.trim), so
// every decision in these tests is made on what the cache keeps.
func watched(c *Controller, nodes ...*corev1.Node) []*corev1.Node {
	cached := make([]*corev1.Node, len(nodes))
	for i, n := range nodes {
		obj, err := c.trim(n.DeepCopy())
		if err != nil {
			panic(err)
		}
		cached[i] = obj.(*corev1.Node)
		c.obs.observe(cached[i], n.CreationTimestamp.Time)
	}
	return cached
}

// marked gives n the mark this controller writes for n in its current state
// (apply it after the taints and labels), or with edit applied to it.
func marked(edit ...func(*Mark)) nodeOpt {
	return func(n *corev1.Node) {
		taint := startup
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == startup }) {
			taint = unhealthy
		}
		m := Mark{By: markAuthor, UID: n.UID, Taint: taint, Verified: n.Labels["node-ready/verified"], At: t0.Add(-time.Hour)}
		for _, e := range edit {
			e(&m)
		}
		v, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		n.Annotations["infra.894.io/replacing"] = string(v)
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
		wantUnmark   []string
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
			name:   "unhealthy taint dated by this controller's first sight, never by the agent's condition (the node's clock)",
			policy: PolicyReplace,
			nodes: []*corev1.Node{
				node("seen-recently", 5*time.Minute, taint(unhealthy), label("node-ready/verified", "false"), failingSince(40*time.Hour)),
				node("seen-long-ago", 40*time.Minute, taint(unhealthy), label("node-ready/verified", "false"), failingSince(-time.Hour)),
			},
			total:       100,
			wantOverdue: []string{"seen-long-ago"}, wantBlocked: map[string]string{"seen-long-ago": "in_service"},
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
				node("gone1", time.Hour, taint(startup), marked()),
				node("next", time.Hour, taint(startup)),
			},
			wantOverdue: []string{"next"}, wantBlocked: map[string]string{"next": "max_replacing"}, wantInFlight: 1,
		},
		{
			name:   "a mark that is not ours for this incarnation and state holds no budget and shortcuts nothing",
			policy: PolicyReplace, maxReplacing: "3", fleet: "50%", total: 10,
			nodes: []*corev1.Node{
				node("old-format", time.Hour, taint(startup), annotation("infra.894.io/replacing", t0.Add(-time.Hour).Format(time.RFC3339))),
				node("other-uid", time.Hour, taint(startup), marked(func(m *Mark) { m.UID = uuid.NewUUID() })),
				node("other-state", time.Hour, taint(unhealthy), label("node-ready/verified", "false"), marked(func(m *Mark) { m.Taint, m.Verified = startup, "" })),
				node("not-ours", time.Hour, taint(startup), marked(func(m *Mark) { m.By = "someone" })),
				node("young-stale", time.Minute, taint(startup), annotation("infra.894.io/replacing", t0.Add(-time.Hour).Format(time.RFC3339))),
			},
			wantOverdue: []string{"not-ours", "old-format", "other-state", "other-uid"}, wantReplace: []string{"not-ours", "old-format", "other-uid"},
			wantBlocked: map[string]string{"other-state": "in_service"}, wantUnmark: []string{"old-format", "other-uid", "other-state", "not-ours", "young-stale"},
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
				node("r1", 5*time.Minute, taint(unhealthy), label("node-ready/verified", "false")),
				node("r2", 5*time.Minute, taint(unhealthy), label("node-ready/verified", "false")),
				node("new", time.Hour, taint(startup)),
			},
			wantOverdue: []string{"new"}, wantBlocked: map[string]string{"new": "fleet_budget"},
		},
		{
			name:   "one below the fleet budget still replaces",
			policy: PolicyReplace, fleet: "2", total: 20,
			nodes: []*corev1.Node{
				node("r1", 5*time.Minute, taint(unhealthy), label("node-ready/verified", "false")),
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
			p := c.plan(watched(c, tt.nodes...), total, t0)
			var unmark []string
			for _, n := range p.Unmark {
				unmark = append(unmark, n.Name)
			}
			if !slices.Equal(unmark, tt.wantUnmark) {
				t.Errorf("unmark %v, want %v", unmark, tt.wantUnmark)
			}
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

// A node that verified once is in service: only reported, unless the
// opt-in; and then its own re-taint counts against the fleet budget, so a
// budget the agents used up (they re-taint up to it, never past it) holds
// every replacement, in a small cluster (budget 1) the one re-tainted node's
// own too.
func TestInServiceNodesAndTheFleetBudget(t *testing.T) {
	sick := node("sick", 10*time.Hour, taint(unhealthy), label("node-ready/verified", "false"), failingSince(time.Hour))
	fresh := node("fresh", time.Hour, taint(startup))
	cases := []struct {
		name        string
		fleet       string
		optIn       bool
		nodes       []*corev1.Node
		wantReplace []string
		wantBlocked map[string]string
	}{
		{"in service, no opt-in: reported", "2", false, []*corev1.Node{sick}, nil, map[string]string{"sick": blockedInService}},
		{"opt-in, budget 2, one re-tainted: replaced", "2", true, []*corev1.Node{sick}, []string{"sick"}, map[string]string{}},
		{"opt-in, budget 1 used up by its own re-taint", "1", true, []*corev1.Node{sick}, nil, map[string]string{"sick": blockedFleet}},
		{"budget 1 used up: a new node is held too", "1", false, []*corev1.Node{sick, fresh},
			nil, map[string]string{"sick": blockedInService, "fresh": blockedFleet}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testController(t, PolicyReplace, "2", tc.fleet, false)
			c.cfg.ReplaceInService = tc.optIn
			p := c.plan(watched(c, tc.nodes...), 5, t0)
			if !slices.Equal(names(p.Replace), tc.wantReplace) || !maps.Equal(p.Blocked, tc.wantBlocked) {
				t.Errorf("replace %v, blocked %v; want %v, %v", names(p.Replace), p.Blocked, tc.wantReplace, tc.wantBlocked)
			}
		})
	}
}

// A validly marked node never deleted (the delete failed, the leader
// stopped in between) is tried again only after this replica has seen its
// mark for a while, and then only through the same gates as a first
// attempt: protected, fleet budget, circuit breaker.
func TestStalledReplacementIsRetriedThroughTheGates(t *testing.T) {
	c := testController(t, PolicyReplace, "3", "10%", false)
	stuck := node("stuck", time.Hour, taint(startup), marked())
	protected := node("protected", time.Hour, taint(startup), annotation("infra.894.io/protect", "true"), marked())
	going := node("going", time.Hour, taint(startup), marked(), deleting())
	nodes := watched(c, stuck, protected, going)
	if p := c.plan(nodes, 10, t0); len(p.Overdue) != 0 || p.Replacing != 3 {
		t.Fatalf("overdue %v, replacing %d: want nothing retried at first sight of the marks, all three counted", names(p.Overdue), p.Replacing)
	}
	p := c.plan(nodes, 10, t0.Add(time.Minute))
	if !slices.Equal(names(p.Replace), []string{"stuck"}) || p.Blocked["protected"] != "protected" {
		t.Fatalf("replace %v, blocked %v: want stuck retried, protected held", names(p.Replace), p.Blocked)
	}
	c.brks.of("").open = true
	if p := c.plan(nodes, 10, t0.Add(2*time.Minute)); len(p.Replace) != 0 || p.Blocked["stuck"] != "circuit_breaker" {
		t.Fatalf("replace %v, blocked %v: want the retry held by the open breaker", names(p.Replace), p.Blocked)
	}
}

// The gate is the same function on the cache and on the fresh read: a node
// that verified, gained protection or lost budget room in between is held.
func TestGateOnFreshRead(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "10%", false)
	since := t0.Add(-time.Hour)
	room := counts{fleet: 1, replace: 1}
	cases := []struct {
		name string
		n    *corev1.Node
		cnt  counts
		want string
	}{
		{"unverified, overdue, room", node("n", time.Hour, taint(startup)), room, ""},
		{"verified since", node("n", time.Hour, label("node-ready/verified", "true")), room, notUnverified},
		{"verified label, taint still there", node("n", time.Hour, taint(startup), label("node-ready/verified", "true")), room, notUnverified},
		{"being deleted", node("n", time.Hour, taint(startup), deleting()), room, notUnverified},
		{"protected since", node("n", time.Hour, taint(startup), annotation("infra.894.io/protect", "true")), room, blockedProtected},
		{"fleet budget used up since", node("n", time.Hour, taint(startup)), counts{retainted: 1, fleet: 1, replace: 1}, blockedFleet},
		{"another replacement since", node("n", time.Hour, taint(startup)), counts{inFlight: 1, fleet: 1, replace: 1}, blockedMax},
		{"its own mark uses its own slot", node("n", time.Hour, taint(startup), marked()), counts{inFlight: 1, fleet: 1, replace: 1}, ""},
		{"bypassed by an operator since", node("n", time.Hour, taint(startup), annotation("node-ready/skip-verification", "true")), room, notUnverified},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.gate(tc.n, since, tc.cnt, t0); got != tc.want {
				t.Errorf("gate %q, want %q", got, tc.want)
			}
		})
	}
	if got := c.gate(node("n", time.Hour, taint(startup)), t0.Add(-time.Minute), room, t0); got != notOverdue {
		t.Errorf("gate %q for a node seen a minute ago, want %q", got, notOverdue)
	}
}

// A mark is valid only for the incarnation and state it was written for.
func TestMarkValidity(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "10%", false)
	n := node("n", time.Hour, taint(unhealthy), label("node-ready/verified", "false"), marked())
	if _, ok := c.validMark(n); !ok {
		t.Fatal("a mark written for this node in this state is not valid")
	}
	verified := n.DeepCopy()
	verified.Labels["node-ready/verified"] = "true"
	verified.Spec.Taints = nil
	again := recreated(n)
	for name, m := range map[string]*corev1.Node{"verified": verified, "new incarnation": again} {
		if _, ok := c.validMark(m); ok {
			t.Errorf("%s: mark still valid", name)
		}
	}
}

// A node an operator bypassed frees its slot of the fleet budget even while
// its agent is down and its label still says re-tainted, as the agents count.
func TestBypassedNodeDoesNotCountAgainstTheFleetBudget(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "1", false)
	bypassed := node("b", time.Hour, taint(unhealthy), label("node-ready/verified", "false"),
		annotation("node-ready/skip-verification", "true"))
	retainted := node("r", time.Hour, taint(unhealthy), label("node-ready/verified", "false"))
	if got := c.countsOf([]*corev1.Node{bypassed}, 10).retainted; got != 0 {
		t.Errorf("re-tainted count with only a bypassed node = %d, want 0", got)
	}
	if got := c.countsOf([]*corev1.Node{bypassed, retainted}, 10).retainted; got != 1 {
		t.Errorf("re-tainted count with a bypassed and a re-tainted node = %d, want 1", got)
	}
}
