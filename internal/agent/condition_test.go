package agent

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

func TestConditionPatch(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	modes := CheckModes{Continuous: []string{"api"}, Bootstrap: []string{"dns"}}
	passing := PassingCondition(modes)
	failing := FailingCondition([]string{"dns"}, earlier.Time, modes)
	node := func(c *ConditionState) *corev1.Node {
		n := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if c != nil {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
				Type: ConditionType, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: earlier,
			})
		}
		return n
	}
	tests := []struct {
		name           string
		node           *corev1.Node
		want           ConditionState
		noPatch        bool
		wantTransition metav1.Time
	}{
		{name: "absent: written", node: node(nil), want: passing, wantTransition: metav1.NewTime(now)},
		{name: "unchanged: nothing to write", node: node(&passing), want: passing, noPatch: true},
		{name: "status changes: transition now", node: node(&passing), want: failing, wantTransition: metav1.NewTime(now)},
		{name: "same status, new message: transition kept", node: node(&failing), want: FailingCondition([]string{"dns", "network"}, earlier.Time, modes), wantTransition: earlier},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := ConditionPatch(tt.node, tt.want, now)
			if err != nil {
				t.Fatal(err)
			}
			if tt.noPatch {
				if patch != nil {
					t.Errorf("patch %s, want none", patch)
				}
				return
			}
			var got struct {
				Status struct {
					Conditions []corev1.NodeCondition `json:"conditions"`
				} `json:"status"`
			}
			if err := json.Unmarshal(patch, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Status.Conditions) != 1 {
				t.Fatalf("patch %s: want exactly our condition (a strategic merge keeps the others)", patch)
			}
			c := got.Status.Conditions[0]
			if c.Type != ConditionType || c.Status != tt.want.Status || c.Reason != tt.want.Reason || c.Message != tt.want.Message {
				t.Errorf("condition %+v, want %+v", c, tt.want)
			}
			if !c.LastTransitionTime.Equal(&tt.wantTransition) {
				t.Errorf("lastTransitionTime %v, want %v", c.LastTransitionTime, tt.wantTransition)
			}
		})
	}
	if m := failing.Message; m != "checks failing; failing: dns; since: 2026-01-01T00:00:00Z; continuous: api; bootstrap: dns" {
		t.Errorf("failing message %q", m)
	}
}

// TestConditionMessagesReadBack: every condition the agent writes reads
// back through api.ParseConditionMessage (what the kubectl plugin uses)
// with what the agent meant.
func TestConditionMessagesReadBack(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	modes := CheckModes{Continuous: []string{"api"}, Bootstrap: []string{"dns", "network"}}
	tests := []struct {
		name string
		cond ConditionState
		want api.ConditionMessage
	}{
		{"failing", FailingCondition([]string{"dns", "api"}, since, modes), api.ConditionMessage{Failing: []string{"dns", "api"}, Since: since, HasModes: true, Continuous: modes.Continuous, Bootstrap: modes.Bootstrap}},
		{"passing", PassingCondition(modes), api.ConditionMessage{HasModes: true, Continuous: modes.Continuous, Bootstrap: modes.Bootstrap}},
		{"recovering", RecoveringCondition(1, 2, CheckModes{}), api.ConditionMessage{Passed: 1, Needed: 2, HasModes: true}},
		{"bootstrapped", BootstrappedCondition(modes), api.ConditionMessage{HasModes: true, Continuous: modes.Continuous, Bootstrap: modes.Bootstrap}},
		{"bypassed", BypassedCondition(api.SkipVerificationAnnotation), api.ConditionMessage{Annotation: api.SkipVerificationAnnotation + "=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := api.ParseConditionMessage(tt.cond.Message)
			if err != nil {
				t.Fatal(err)
			}
			if got.Summary == "" {
				t.Errorf("message %q has no summary for people", tt.cond.Message)
			}
			got.Summary = ""
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("read back %+v, want %+v", got, tt.want)
			}
		})
	}
}
