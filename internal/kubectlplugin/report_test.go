package kubectlplugin

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

var (
	now     = time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
	created = metav1.NewTime(now.Add(-26 * time.Hour))
	since   = time.Date(2026, 11, 21, 14, 1, 2, 0, time.UTC)
	modes   = agent.CheckModes{Continuous: []string{"dns", "api", "network", "discovery"}}
)

var (
	startupTaint   = corev1.Taint{Key: api.StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	unhealthyTaint = corev1.Taint{Key: api.UnhealthyTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
)

// testNode is a node as the agent and the webhook leave it: cond is the
// agent's condition (written with the agent's own constructors), nil for none.
func testNode(name string, verified string, taints []corev1.Taint, cond *agent.ConditionState, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID(), CreationTimestamp: created,
			Labels: map[string]string{}, Finalizers: []string{api.Finalizer}},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		}},
	}
	if verified != "" {
		n.Labels[api.VerifiedLabel] = verified
	}
	if cond != nil {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: agent.ConditionType, Status: cond.Status, Reason: cond.Reason, Message: cond.Message,
			LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since.Add(-time.Hour)),
		})
	}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

func annotate(key, value string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[key] = value
	}
}

func deleting(n *corev1.Node) {
	t := metav1.NewTime(now.Add(-4 * time.Minute))
	n.DeletionTimestamp = &t
}

func condition(c agent.ConditionState) *agent.ConditionState { return &c }

func TestStatusLine(t *testing.T) {
	failing := condition(agent.FailingCondition([]string{"dns", "network"}, since, modes))
	tests := []struct {
		name string
		node corev1.Node
		// want is the row of the status table, columns separated by " | ".
		want string
		// wantWide are the columns -o wide adds.
		wantWide string
	}{
		{name: "verified",
			node: testNode("a", "true", nil, condition(agent.PassingCondition(modes))),
			want: "a | true | none | - | 26h | none", wantWide: "ChecksPassed | false | true"},
		{name: "new node, checks failing",
			node: testNode("b", "", []corev1.Taint{startupTaint}, failing),
			want: "b | unknown | unverified | dns,network | 26h | none", wantWide: "ChecksFailing | false | true"},
		{name: "re-tainted",
			node: testNode("c", "false", []corev1.Taint{unhealthyTaint}, failing),
			want: "c | false | unhealthy | dns,network | 26h | none", wantWide: "ChecksFailing | false | true"},
		{name: "re-tainted and recovering: nothing failing",
			node: testNode("d", "false", []corev1.Taint{unhealthyTaint}, condition(agent.RecoveringCondition(1, 2, modes))),
			want: "d | false | unhealthy | - | 26h | none", wantWide: "Recovering | false | true"},
		{name: "both taints, other taints ignored",
			node: testNode("e", "false", []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoExecute}, unhealthyTaint, startupTaint}, nil),
			want: "e | false | unverified,unhealthy | - | 26h | none", wantWide: "- | false | true"},
		{name: "bypassed",
			node: testNode("f", "true", nil, condition(agent.BypassedCondition(api.SkipVerificationAnnotation)), annotate(api.SkipVerificationAnnotation, "true")),
			want: "f | true | none | - | 26h | none", wantWide: "Bypassed | true | true"},
		{name: "no agent, no finalizer, label neither true nor false",
			node: testNode("g", "maybe", []corev1.Taint{startupTaint}, nil, func(n *corev1.Node) { n.Finalizers = nil }),
			want: "g | unknown | unverified | - | 26h | none", wantWide: "- | false | false"},
		{name: "skip-cleanup set in advance",
			node: testNode("h", "true", nil, nil, annotate(api.SkipCleanupAnnotation, "true")),
			want: "h | true | none | - | 26h | skip", wantWide: "- | false | true"},
		{name: "being deleted, a plugin failed",
			node: testNode("i", "true", nil, nil, deleting,
				annotate(api.CleanupStatusAnnotation, `{"attempt":2,"plugins":{"portworx":"failed: HTTP 500","volumeattachments":"done"},"retryIn":"20s"}`)),
			want: "i | true | none | - | 26h | deleting: attempt 2, 1 failed", wantWide: "- | false | true"},
		{name: "being deleted, status annotation garbled",
			node: testNode("j", "true", nil, nil, deleting, annotate(api.CleanupStatusAnnotation, `not json at all`)),
			want: "j | true | none | - | 26h | deleting: status unreadable", wantWide: "- | false | true"},
		{name: "condition message the plugin does not know",
			node: testNode("k", "false", []corev1.Taint{startupTaint}, &agent.ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonChecksFailing, Message: "something else"}),
			want: "k | false | unverified | - | 26h | none", wantWide: "ChecksFailing | false | true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Report(&tt.node, PresetTaintKeys())
			for _, wide := range []bool{false, true} {
				var buf bytes.Buffer
				if err := PrintStatus(&buf, []NodeReport{r}, wide, now); err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
				if len(lines) != 2 {
					t.Fatalf("output %q: want a header and one line", buf.String())
				}
				want := tt.want
				if wide {
					want += " | " + tt.wantWide
				}
				if got := columns(lines[1]); got != want {
					t.Errorf("wide=%t: line %q\n got columns %q\nwant columns %q", wide, lines[1], got, want)
				}
			}
		})
	}
}

// columns splits a table line on runs of two or more spaces, joined with " | ".
func columns(line string) string {
	var out []string
	for _, f := range strings.Split(line, "  ") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return strings.Join(out, " | ")
}

func TestReportsSortedAndInCleanup(t *testing.T) {
	nodes := []corev1.Node{
		testNode("c", "true", nil, nil, deleting),
		testNode("a", "true", nil, nil),
		testNode("b", "true", nil, nil, deleting, func(n *corev1.Node) { n.Finalizers = []string{"example.com/other"} }),
	}
	reports := Reports(nodes, PresetTaintKeys())
	var names []string
	for _, r := range reports {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("reports in order %v, want by name", names)
	}
	cleaning := InCleanup(reports)
	if len(cleaning) != 1 || cleaning[0].Name != "c" {
		t.Errorf("in cleanup: %v, want only c (deleting with our finalizer)", cleaning)
	}
	if got := InCleanup(nil); got == nil || len(got) != 0 {
		t.Errorf("InCleanup(nil) = %#v, want an empty list (prints [] not null)", got)
	}
}

// agentFailing is the agent's condition while dns fails.
func agentFailing() agent.ConditionState {
	return agent.FailingCondition([]string{"dns"}, since, modes)
}
