package doctor

import (
	"slices"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Role is what one of our taints marks on a node.
type Role string

const (
	// RoleStartup marks a node the agent has not verified yet.
	RoleStartup Role = "startup"
	// RoleUnhealthy marks a verified node the agent re-tainted.
	RoleUnhealthy Role = "unhealthy"
)

// presetTaint is the taint of role that the chart's preset (api.Presets)
// writes, as the chart writes it; the fixes name it. An unknown preset is a
// programming error: the zero Taint.
func presetTaint(preset string, role Role) Taint {
	p, ok := api.LookupPreset(preset)
	if !ok {
		return Taint{}
	}
	s := p.StartupTaint()
	if role == RoleUnhealthy {
		s = p.UnhealthyTaint()
	}
	t, _ := ParseTaint(s)
	return t
}

// ourKeys are every key a kube-node-ready preset writes, sorted: the agent
// keeps removing each of them, so a node that carries a previous preset's
// key is not stranded.
func ourKeys() []string {
	keys := slices.Concat(api.PreviousStartupTaintKeys(), api.PreviousUnhealthyTaintKeys())
	slices.Sort(keys)
	return slices.Compact(keys)
}
