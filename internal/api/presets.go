package api

import (
	"slices"
	"time"
)

// Taint keys that autoscalers understand. A key the autoscaler in the
// cluster does not know makes it over-scale (it takes the tainted node for
// usable capacity that pods do not fit on) or, with Cluster Autoscaler,
// poisons the node group's template: ../../docs/autoscalers.md says which.
const (
	// CAStartupTaintKey is under Cluster Autoscaler's reserved startup
	// prefix: a node carrying it counts as still starting (upcoming, no
	// second scale-up) for --max-node-startup-time, with no CA flag, also on
	// GKE and AKS where CA's flags cannot be set.
	CAStartupTaintKey = "startup-taint.cluster-autoscaler.kubernetes.io/node-ready"
	// CAStatusTaintKey is under Cluster Autoscaler's reserved status prefix:
	// a Ready node carrying it is unusable capacity CA replaces, and the
	// taint is stripped from the node group's template. Karpenter takes any
	// taint on an initialized node for a permanent one, and replaces that
	// capacity too.
	CAStatusTaintKey = "status-taint.cluster-autoscaler.kubernetes.io/node-ready"
	// KarpenterStartupTaintKey is under the readiness.k8s.io/ prefix, which
	// Karpenter ignores until the node is initialized and waits to see gone,
	// even when the NodePool's startupTaints do not list it.
	KarpenterStartupTaintKey = "readiness.k8s.io/node-ready"
)

// CAMaxNodeStartupTime is Cluster Autoscaler's default
// --max-node-startup-time, and its --max-node-provision-time: a node still
// carrying a startup taint this long after it was created counts as unready
// (CA may scale up again and later remove it), and a scale-up whose node has
// not started this long after CA's decision backs the node group off.
const CAMaxNodeStartupTime = 15 * time.Minute

// DefaultUnverifiedDeadline is the webhook's --unverified-deadline when it
// is not given, under preset. Under Cluster Autoscaler a node still
// carrying the startup taint at CAMaxNodeStartupTime backs its node group
// off and counts as unready, so the deadline falls well before it, leaving
// the instance's boot time: remediation then reports or replaces the node
// first. Karpenter has no such timeout (an uninitialized node is kept
// until someone acts).
func DefaultUnverifiedDeadline(preset string) time.Duration {
	if preset == PresetClusterAutoscaler {
		return 10 * time.Minute
	}
	return 30 * time.Minute
}

// The presets' names: the chart's autoscaler value and the agent's and the
// webhook's --autoscaler flag.
const (
	PresetClusterAutoscaler = "cluster-autoscaler"
	PresetKarpenter         = "karpenter"
	// PresetNone keeps the seed keys, StartupTaintKey and UnhealthyTaintKey.
	PresetNone = "none"
	// DefaultPreset is what a user who sets nothing gets.
	DefaultPreset = PresetClusterAutoscaler
)

// taintForm is the value and effect of every preset's taints.
const taintForm = "=true:NoSchedule"

// Preset names the startup and unhealthy taint keys that one kind of
// autoscaler understands. Both taints are key=true:NoSchedule.
type Preset struct {
	// Name is the value of --autoscaler that picks the preset.
	Name string
	// StartupTaintKey is the key new nodes start with.
	StartupTaintKey string
	// UnhealthyTaintKey is the key a verified node whose checks keep
	// failing gets.
	UnhealthyTaintKey string
}

// StartupTaint is the preset's startup taint in key=value:Effect form.
func (p Preset) StartupTaint() string { return p.StartupTaintKey + taintForm }

// UnhealthyTaint is the preset's unhealthy taint in key=value:Effect form.
func (p Preset) UnhealthyTaint() string { return p.UnhealthyTaintKey + taintForm }

// Presets lists every preset, the default first.
func Presets() []Preset {
	return []Preset{
		{Name: PresetClusterAutoscaler, StartupTaintKey: CAStartupTaintKey, UnhealthyTaintKey: CAStatusTaintKey},
		{Name: PresetKarpenter, StartupTaintKey: KarpenterStartupTaintKey, UnhealthyTaintKey: CAStatusTaintKey},
		{Name: PresetNone, StartupTaintKey: StartupTaintKey, UnhealthyTaintKey: UnhealthyTaintKey},
	}
}

// PresetNames lists the presets' names, the default first.
func PresetNames() []string {
	var names []string
	for _, p := range Presets() {
		names = append(names, p.Name)
	}
	return names
}

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, bool) {
	i := slices.IndexFunc(Presets(), func(p Preset) bool { return p.Name == name })
	if i < 0 {
		return Preset{}, false
	}
	return Presets()[i], true
}

// Default is the default preset.
func Default() Preset {
	p, _ := LookupPreset(DefaultPreset)
	return p
}

// PreviousStartupTaintKeys are the startup keys of every preset (the seed
// key among them): a node carrying one, after the configured keys changed,
// is still a node being verified, and the agent removes the key with its
// own when the checks pass. Nothing adds them but the node's creator.
func PreviousStartupTaintKeys() []string {
	return presetKeys(func(p Preset) string { return p.StartupTaintKey })
}

// PreviousUnhealthyTaintKeys are the unhealthy keys of every preset (the
// seed key among them): a node carrying one recovers like one carrying the
// configured unhealthy taint.
func PreviousUnhealthyTaintKeys() []string {
	return presetKeys(func(p Preset) string { return p.UnhealthyTaintKey })
}

func presetKeys(key func(Preset) string) []string {
	var keys []string
	for _, p := range Presets() {
		if k := key(p); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
