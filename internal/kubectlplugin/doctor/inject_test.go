package doctor

import (
	"strings"
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
		setup := Setup{Install: in, Karpenter: true, NodePools: []NodePool{{Name: "default", Karpenter: v1141}}}
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

// TestInjectedKeyOnAnOldKarpenter: below Karpenter v1.13.0 the key the
// webhook adds at creation is permanent, whichever preset: a problem,
// with the fix; with no Karpenter Deployment visible (its version unknown),
// advice.
func TestInjectedKeyOnAnOldKarpenter(t *testing.T) {
	for _, preset := range []string{api.PresetClusterAutoscaler, api.PresetKarpenter} {
		in := Install{Agent: "DaemonSet kube-node-ready/kube-node-ready", Startup: presetTaint(preset, RoleStartup), Unhealthy: presetTaint(preset, RoleUnhealthy),
			InjectsReadinessKey: true}
		for _, tt := range []struct {
			karpenter Karpenter
			want      Severity
		}{{v1121, Problem}, {Karpenter{Deployment: v1121.Deployment}, Problem}, {Karpenter{}, Advice}} {
			d := Diagnose(Setup{Install: in, Karpenter: true, NodePools: []NodePool{{Name: "default", Karpenter: tt.karpenter}}})
			var got []Finding
			for _, f := range d.Findings {
				if f.Role == RoleStartup {
					got = append(got, f)
				}
			}
			if len(got) != 1 || got[0].Severity != tt.want || got[0].Key != api.KarpenterStartupTaintKey ||
				!strings.Contains(got[0].Fixes[0], "declare "+in.Startup.String()+" in spec.template.spec.startupTaints") {
				t.Errorf("%s, Karpenter %+v: findings %+v, want one %s about %s with the fix", preset, tt.karpenter, got, tt.want, api.KarpenterStartupTaintKey)
			}
		}
	}
}
