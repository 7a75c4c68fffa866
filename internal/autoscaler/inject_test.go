package autoscaler

import (
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// TestNodePoolNeedsNoKeyWhenTheWebhookInjects: with the startup taint added
// at creation (a readiness.k8s.io/ key on a node Karpenter launched), a
// NodePool that declares none of our keys is no problem and needs no
// advice, whichever preset; without it, the default preset's key is a
// runaway.
func TestNodePoolNeedsNoKeyWhenTheWebhookInjects(t *testing.T) {
	for _, preset := range []string{api.PresetClusterAutoscaler, api.PresetKarpenter} {
		in := Install{Agent: "DaemonSet kube-node-ready/kube-node-ready", Startup: presetTaint(preset, RoleStartup), Unhealthy: presetTaint(preset, RoleUnhealthy)}
		setup := Setup{Install: in, Karpenter: true, NodePools: []NodePool{{Name: "default"}}}
		without := Diagnose(setup)
		in.InjectsReadinessKey = true
		setup.Install = in
		with := Diagnose(setup)
		for _, f := range with.Findings {
			if f.Role == RoleStartup {
				t.Errorf("%s, injection on: finding %s %q about %s", preset, f.Severity, f.Summary, f.Key)
			}
		}
		if preset == api.PresetClusterAutoscaler && without.Problems() == 0 {
			t.Errorf("%s, injection off: no problem found for an undeclared %s", preset, in.Startup.Key)
		}
	}
}
