package checks

import (
	"context"
	"flag"
	"log/slog"
	"net/netip"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

// Config is one check's own configuration: its flags with their defaults,
// their validation, and how the check is built from them. Adding a check is
// its file here (the check and its Config), its test, and one row in the
// agent's check table.
type Config interface {
	// AddFlags registers the check's flags on fs.
	AddFlags(fs *flag.FlagSet)
	// Validate reports invalid values, each naming its flag. enabled says
	// whether the check runs; a disabled check may still refuse settings that
	// would silently do nothing.
	Validate(enabled bool) []error
	// Build returns the check.
	Build(d Deps) Check
}

// GateConfig is a gate's configuration: a gate is enabled by its own
// flags, not by --checks.
type GateConfig interface {
	Config
	// Enabled reports whether the gate's flags turn it on.
	Enabled() bool
}

// Deps is what the agent gives every check it builds.
type Deps struct {
	// Client reads the agent's own node.
	Client NodeGetter
	// Endpoints is the EndpointSlice cache the network and discovery checks share.
	Endpoints *endpoints.EndpointCache
	// PeerSlices, when set, is Endpoints' source, and the network check
	// has it follow only some of its peer Service's slices; unset, the
	// peer Service is read whole (the one-shot check command lists it).
	PeerSlices *endpoints.PeerSlices
	// DNSService is the cluster DNS Service, used by more than one check.
	DNSService endpoints.ServiceRef
	// IPFamilies are the address families the dns and discovery checks ask
	// for (--ip-families, "auto" resolved at start-up); empty asks for both.
	IPFamilies IPFamilies
	// Kube lists and watches what the gates read: pods and DaemonSets (the
	// DaemonSet gate), CSINodes (the CSI drivers gate), ResourceSlices
	// (the DRA gate).
	Kube kubernetes.Interface
	// Resources says whether the API server serves ResourceSlices, for the DRA gate.
	Resources ResourceSliceDiscovery
	// NodeName, PodIP, PodName and PodNamespace identify the agent.
	NodeName     string
	PodIP        netip.Addr
	PodName      string
	PodNamespace string
	// AgentTaints are the keys of the taints the agent manages or waits
	// for: the DaemonSet gate ignores them when it decides whether a
	// DaemonSet will run on the node, as its pods need not tolerate them.
	AgentTaints []string
	// Log receives the checks' rare notes.
	Log *slog.Logger
	// Clock is the time of the checks' own rules (how long the dns check
	// trusts what it learnt of the Service's addresses); nil is the real
	// clock. A check's timeout is its context's, not this clock's.
	Clock clock.PassiveClock
}

// ResourceSliceDiscovery says whether the API server serves ResourceSlices
// (resource.k8s.io/v1), for the DRA gate.
type ResourceSliceDiscovery interface {
	ResourceSlicesServed(ctx context.Context) (bool, error)
}
