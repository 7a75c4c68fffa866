package app

import (
	"net/netip"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

// Config is what Options.Resolve made of validated options: the loop's
// configuration and what the checks and gates are built from. Assemble,
// Build and BuildChecks read it, never the Options.
type Config struct {
	// Agent is the loop's configuration; Assemble adds the suspend switch.
	Agent agent.Config
	// Enabled lists the enabled checks, then the enabled gates.
	Enabled []string
	// NodeName, PodName and PodNamespace say where the agent runs; PodIP is
	// its own address (invalid when not given).
	NodeName, PodName, PodNamespace string
	PodIP                           netip.Addr
	// DNSService is the cluster DNS Service.
	DNSService endpoints.ServiceRef
	// AgentTaints are the taint keys the agent manages or waits for, which
	// the DaemonSet gate ignores on pods' tolerations.
	AgentTaints []string
	// SuspendConfigMap is the operator's suspend switch in PodNamespace.
	SuspendConfigMap string
	// CheckTimeout bounds each check, and the read of the IP families.
	CheckTimeout time.Duration

	// rows are the enabled rows of the table, in its order; checksFlag is
	// --checks as given.
	rows       []checkRow
	checksFlag string
	// autoFamilies is --ip-families=auto; families are the families given,
	// or those ResolveIPFamilies settled "auto" on (nil before).
	autoFamilies bool
	families     checks.IPFamilies
}
