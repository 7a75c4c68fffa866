package kubectlplugin

import (
	"slices"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
)

// TestRoundOf reads every condition the agent writes, made with the
// agent's own constructors.
func TestRoundOf(t *testing.T) {
	m := agent.CheckModes{Continuous: []string{"api"}, Bootstrap: []string{"dns", "network"}}
	tests := []struct {
		name        string
		cond        agent.ConditionState
		wantOutcome string
		wantDetail  string
		wantFailing []string
		wantSince   time.Time
		wantCont    string
		wantBoot    string
	}{
		{name: "failing", cond: agent.FailingCondition([]string{"dns", "api"}, since, m),
			wantOutcome: "failed", wantDetail: "failing: dns,api (since 2026-11-21T14:01:02Z)", wantFailing: []string{"dns", "api"},
			wantSince: since, wantCont: "api", wantBoot: "dns,network"},
		{name: "passing", cond: agent.PassingCondition(m), wantOutcome: "passed", wantDetail: "all checks pass", wantCont: "api", wantBoot: "dns,network"},
		{name: "recovering", cond: agent.RecoveringCondition(1, 2, agent.CheckModes{}),
			wantOutcome: "recovering", wantDetail: "checks pass again: 1 of 2 passed rounds needed to untaint", wantCont: "none", wantBoot: "none"},
		{name: "bootstrapped", cond: agent.BootstrappedCondition(m),
			wantOutcome: "bootstrapped", wantDetail: "verified; bootstrap-only: no further checks run on this node", wantCont: "api", wantBoot: "dns,network"},
		{name: "bypassed", cond: agent.BypassedCondition(BypassAnnotation),
			wantOutcome: "bypassed", wantDetail: "checks bypassed: annotation node-ready/skip-verification=true"},
		{name: "someone else's reason", cond: agent.ConditionState{Reason: "Custom", Message: "hello; continuous"},
			wantOutcome: "Custom", wantDetail: "hello; continuous"},
		{name: "failing with a message in an unknown shape", cond: agent.ConditionState{Reason: ReasonChecksFailing, Message: "failing: dns"},
			wantOutcome: "failed", wantDetail: "failing: dns", wantFailing: []string{"dns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := RoundOf(tt.cond.Reason, tt.cond.Message)
			if r.Outcome != tt.wantOutcome || r.Detail != tt.wantDetail || r.Continuous != tt.wantCont || r.Bootstrap != tt.wantBoot {
				t.Errorf("round %+v\nwant outcome %q detail %q continuous %q bootstrap %q", r, tt.wantOutcome, tt.wantDetail, tt.wantCont, tt.wantBoot)
			}
			if !slices.Equal(r.Failing, tt.wantFailing) || !r.Since.Equal(tt.wantSince) {
				t.Errorf("failing %v since %v, want %v since %v", r.Failing, r.Since, tt.wantFailing, tt.wantSince)
			}
		})
	}
}
