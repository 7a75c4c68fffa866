package kubectlplugin

import (
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/app"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/nodecleanup"
)

// TestNamesMatchTheBinaries: the plugin's copies of the names are the
// agent's and the webhook's defaults (the copies keep their dependencies
// out of the plugin; this keeps them honest).
func TestNamesMatchTheBinaries(t *testing.T) {
	a, w := app.NewOptions(), webhook.NewOptions()
	startup, err := cli.ParseTaint(a.StartupTaint)
	if err != nil {
		t.Fatal(err)
	}
	unhealthy, err := cli.ParseTaint(a.UnhealthyTaint)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, ours, theirs string }{
		{"condition type", ConditionType, string(agent.ConditionType)},
		{"startup taint", StartupTaintKey, startup.Key},
		{"unhealthy taint", UnhealthyTaintKey, unhealthy.Key},
		{"verified label", VerifiedLabel, a.VerifiedLabel},
		{"bypass annotation", BypassAnnotation, a.SkipAnnotation},
		{"finalizer", Finalizer, w.Finalizer},
		{"skip-cleanup annotation", SkipCleanupAnnotation, w.SkipAnnotation},
		{"cleanup status annotation", CleanupStatusAnnotation, nodecleanup.StatusAnnotation},
		{"reason passed", ReasonChecksPassed, agent.ReasonChecksPassed},
		{"reason failing", ReasonChecksFailing, agent.ReasonChecksFailing},
		{"reason recovering", ReasonRecovering, agent.ReasonRecovering},
		{"reason bootstrapped", ReasonBootstrapped, agent.ReasonBootstrapped},
		{"reason bypassed", ReasonBypassed, agent.ReasonBypassed},
	} {
		if tt.ours != tt.theirs {
			t.Errorf("%s: plugin has %q, the binaries %q", tt.name, tt.ours, tt.theirs)
		}
	}
}
