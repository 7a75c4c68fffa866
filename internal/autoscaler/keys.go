package autoscaler

import "slices"

// Role is what one of our taints marks on a node.
type Role string

const (
	// RoleStartup marks a node the agent has not verified yet.
	RoleStartup Role = "startup"
	// RoleUnhealthy marks a verified node the agent re-tainted.
	RoleUnhealthy Role = "unhealthy"
)

// Presets of the chart's autoscaler value: the keys each one sets, which
// the fixes name. The agent keeps removing every one of them, so a node
// that carries a previous preset's key is not stranded.
const (
	PresetClusterAutoscaler = "cluster-autoscaler"
	PresetKarpenter         = "karpenter"
	PresetNone              = "none"
)

// presetKeys are the startup and unhealthy keys of each preset; none keeps
// the seed keys node-ready/unverified and node-ready/unhealthy.
var presetKeys = map[string][2]string{
	PresetClusterAutoscaler: {CAStartupPrefix + "node-ready", CAStatusPrefix + "node-ready"},
	PresetKarpenter:         {KarpenterEphemeralPrefix + "node-ready", CAStatusPrefix + "node-ready"},
	PresetNone:              {"node-ready/unverified", "node-ready/unhealthy"},
}

// presetTaint is a preset's taint of role, as the chart writes it.
func presetTaint(preset string, role Role) Taint {
	i := 0
	if role == RoleUnhealthy {
		i = 1
	}
	return Taint{Key: presetKeys[preset][i], Value: "true", Effect: "NoSchedule"}
}

// ourKeys are every key a kube-node-ready preset has used, sorted.
func ourKeys() []string {
	var keys []string
	for _, k := range presetKeys {
		for _, key := range k {
			if !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		}
	}
	slices.Sort(keys)
	return keys
}
