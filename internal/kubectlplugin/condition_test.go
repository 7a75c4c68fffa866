package kubectlplugin

import (
	"reflect"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// TestRoundOf reads conditions in the agent's encoding (api.ConditionMessage)
// and in shapes it does not know, which it keeps whole.
func TestRoundOf(t *testing.T) {
	failing := api.ConditionMessage{Summary: "checks failing", Failing: []string{"dns", "api"}, Since: since,
		HasModes: true, Continuous: []string{"api"}, Bootstrap: []string{"dns", "network"}}
	passing := api.ConditionMessage{Summary: "all checks pass", HasModes: true, Continuous: []string{"api"}}
	tests := []struct {
		name, reason, message string
		wantOutcome           string
		wantDetail            string
		wantMessage           api.ConditionMessage
	}{
		{name: "failing", reason: api.ReasonChecksFailing, message: failing.String(), wantOutcome: "failed", wantDetail: "checks failing", wantMessage: failing},
		{name: "passing", reason: api.ReasonChecksPassed, message: passing.String(), wantOutcome: "passed", wantDetail: "all checks pass", wantMessage: passing},
		{name: "recovering", reason: api.ReasonRecovering, message: "checks pass again; passed: 1/2", wantOutcome: "recovering", wantDetail: "checks pass again",
			wantMessage: api.ConditionMessage{Summary: "checks pass again", Passed: 1, Needed: 2}},
		{name: "bootstrapped", reason: api.ReasonBootstrapped, message: "verified", wantOutcome: "bootstrapped", wantDetail: "verified", wantMessage: api.ConditionMessage{Summary: "verified"}},
		{name: "bypassed", reason: api.ReasonBypassed, message: "checks bypassed; annotation: a/b=true", wantOutcome: "bypassed", wantDetail: "checks bypassed",
			wantMessage: api.ConditionMessage{Summary: "checks bypassed", Annotation: "a/b=true"}},
		{name: "someone else's reason and message", reason: "Custom", message: "hello; continuous", wantOutcome: "Custom", wantDetail: "hello; continuous"},
		{name: "failing with a message in an unknown shape", reason: api.ReasonChecksFailing, message: "failing; since: yesterday",
			wantOutcome: "failed", wantDetail: "failing; since: yesterday"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := RoundOf(tt.reason, tt.message)
			if r.Outcome != tt.wantOutcome || r.Detail != tt.wantDetail || !reflect.DeepEqual(r.Message, tt.wantMessage) {
				t.Errorf("round %+v\nwant outcome %q detail %q message %+v", r, tt.wantOutcome, tt.wantDetail, tt.wantMessage)
			}
		})
	}
}
