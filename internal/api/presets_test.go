package api

import (
	"slices"
	"testing"
)

func TestPresets(t *testing.T) {
	if p := Default(); p.Name != PresetClusterAutoscaler || p.StartupTaint() != CAStartupTaintKey+"=true:NoSchedule" {
		t.Errorf("default preset = %+v", p)
	}
	if p, ok := LookupPreset(PresetNone); !ok || p.StartupTaintKey != StartupTaintKey || p.UnhealthyTaintKey != UnhealthyTaintKey {
		t.Errorf("the none preset = %+v, %v; want the seed keys", p, ok)
	}
	if _, ok := LookupPreset("cluster-autoscaler "); ok {
		t.Error("a name that is no preset was found")
	}
	if !slices.Equal(PresetNames(), []string{"cluster-autoscaler", "karpenter", "none"}) {
		t.Errorf("names = %v", PresetNames())
	}
}

// TestPreviousKeys: every preset's keys (the seed keys among them) are
// recognized, each in one role only, so a node tainted under any preset is
// never stranded by a change of preset.
func TestPreviousKeys(t *testing.T) {
	startup, unhealthy := PreviousStartupTaintKeys(), PreviousUnhealthyTaintKeys()
	for _, p := range Presets() {
		if !slices.Contains(startup, p.StartupTaintKey) || !slices.Contains(unhealthy, p.UnhealthyTaintKey) {
			t.Errorf("preset %s: keys missing from %v / %v", p.Name, startup, unhealthy)
		}
	}
	for _, k := range startup {
		if slices.Contains(unhealthy, k) {
			t.Errorf("key %s is both a startup and an unhealthy key", k)
		}
	}
	if len(unhealthy) != 2 {
		t.Errorf("unhealthy keys = %v, want the CA status key and the seed key once each", unhealthy)
	}
}
