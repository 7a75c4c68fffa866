package app

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// TestUnverifiedDeadlineFollowsThePreset: unset, the deadline falls before
// Cluster Autoscaler's 15 min under its preset, and stays 30m otherwise; a
// given one wins, and one past 15 min under CA is warned about, once.
func TestUnverifiedDeadlineFollowsThePreset(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want time.Duration
		warn bool
	}{
		{name: "default preset", args: nil, want: 10 * time.Minute},
		{name: "karpenter", args: []string{"--autoscaler=karpenter"}, want: 30 * time.Minute},
		{name: "none", args: []string{"--autoscaler=none"}, want: 30 * time.Minute},
		{name: "given under CA, within its limit", args: []string{"--unverified-deadline=14m"}, want: 14 * time.Minute},
		{name: "given under CA, past its limit", args: []string{"--unverified-deadline=20m"}, want: 20 * time.Minute, warn: true},
		{name: "given past 15m under karpenter: no CA to warn about", args: []string{"--autoscaler=karpenter", "--unverified-deadline=1h"}, want: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, nil, append([]string{"--remediation=report"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if o.Deadline() != tt.want {
				t.Errorf("deadline %s, want %s", o.Deadline(), tt.want)
			}
			w := o.Warnings()
			warned := slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "--max-node-provision-time") })
			if warned != tt.warn || len(w) > 1 {
				t.Errorf("warnings %q, want the CA deadline warning: %v", w, tt.warn)
			}
		})
	}
}

func TestTaintFlagsValidated(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--autoscaler=gke", `--autoscaler: unknown preset "gke"`},
		{"--previous-taint-keys=a b", "--previous-taint-keys"},
		{"--agent-startup-taint=k=v", "--agent-startup-taint"},
		{"--unverified-deadline=0s", "--unverified-deadline: 0s must be positive"},
	} {
		if _, err := parse(t, nil, "--remediation=replace", tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestRemediationKnowsThePreviousKeys: the keys remediation judges nodes by
// are the preset's, then every other preset's and the user's.
func TestRemediationKnowsThePreviousKeys(t *testing.T) {
	o, err := parse(t, nil, "--remediation=report", "--previous-taint-keys=example.com/old")
	if err != nil {
		t.Fatal(err)
	}
	k, err := o.taintKeys()
	if err != nil {
		t.Fatal(err)
	}
	if taintKey(k.Startup) != api.CAStartupTaintKey || !slices.Contains(k.PreviousStartup, api.StartupTaintKey) ||
		!slices.Contains(k.PreviousStartup, "example.com/old") || !slices.Contains(k.PreviousUnhealthy, api.UnhealthyTaintKey) {
		t.Errorf("keys %+v", k)
	}
}
