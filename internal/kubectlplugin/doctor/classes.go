package doctor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Class is how an autoscaler treats a node carrying a taint.
type Class string

const (
	// Startup: Cluster Autoscaler counts the node as still starting
	// (upcoming); Karpenter ignores the taint until the node is
	// initialized. Right for a node being verified.
	Startup Class = "startup"
	// Status: Cluster Autoscaler counts the node as Ready but unusable and
	// replaces its capacity. Right for a node re-tainted as unhealthy.
	Status Class = "status"
	// Unknown: Cluster Autoscaler counts the node as usable capacity that
	// the pending pods do not fit on.
	Unknown Class = "unknown"
	// Permanent: Karpenter takes the taint to stay on the node for good.
	Permanent Class = "permanent"
)

// Cluster Autoscaler's reserved key prefixes: a key under one of them has
// its class whatever CA's flags say, which is all that works where CA's
// flags cannot be set (GKE, AKS).
const (
	CAStartupPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"
	// CAIgnorePrefix is the older name of CAStartupPrefix; CA still honours it.
	CAIgnorePrefix = "ignore-taint.cluster-autoscaler.kubernetes.io/"
	CAStatusPrefix = "status-taint.cluster-autoscaler.kubernetes.io/"
)

// DefaultMaxNodeTime is the default of CA's --max-node-provision-time and
// --max-node-startup-time.
const DefaultMaxNodeTime = 15 * time.Minute

// KarpenterEphemeralPrefix is the key prefix Karpenter ignores on a node
// that is not initialized yet, whatever its NodePool says.
const KarpenterEphemeralPrefix = api.NodeReadinessTaintPrefix

// karpenterEphemeral are the taints of Karpenter's KnownEphemeralTaints
// (key and effect), ignored like startup taints until initialization.
var karpenterEphemeral = []Taint{
	{Key: "node.kubernetes.io/not-ready", Effect: "NoSchedule"},
	{Key: "node.kubernetes.io/unreachable", Effect: "NoSchedule"},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: "NoSchedule"},
	{Key: "karpenter.sh/unregistered", Effect: "NoExecute"},
}

// Taint is a taint's key, value and effect.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// String is the taint as the flags write it: key=value:Effect.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// ParseTaint reads key=value:Effect or key:Effect; it only splits, the
// binaries validate their own flags.
func ParseTaint(s string) (Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || kv == "" || effect == "" {
		return Taint{}, fmt.Errorf("taint %q: want key=value:Effect", s)
	}
	key, value, _ := strings.Cut(kv, "=")
	return Taint{Key: key, Value: value, Effect: effect}, nil
}

// ClusterAutoscaler is one Cluster Autoscaler as its flags configure it.
type ClusterAutoscaler struct {
	// Namespace and Name are its Deployment's; both empty for the Cluster
	// Autoscaler of a managed platform, which no Deployment shows.
	Namespace, Name string
	// Container is the index of CA's container in the pod template.
	Container int
	// ArgsField is the container field its flags are in, "args" or
	// "command", where a fix appends a flag.
	ArgsField string
	// ArgsAbsent says the container has no args (its flags come from the
	// image or command), so a fix creates the field instead of appending.
	ArgsAbsent bool
	// StartupTaints are the keys of --startup-taint and of its older alias
	// --ignore-taint.
	StartupTaints []string
	// StatusTaints are the keys of --status-taint.
	StatusTaints []string
	// StartupTaintPrefixes are the prefixes of --startup-taint-prefix
	// (CA 1.36 and later).
	StartupTaintPrefixes []string
	// MaxNodeProvisionTime is --max-node-provision-time: a scale-up still
	// open this long after the decision is timed out and its group backed off.
	MaxNodeProvisionTime time.Duration
	// MaxNodeStartupTime is --max-node-startup-time: a node still carrying a
	// startup taint this long after creation counts as Unready.
	MaxNodeStartupTime time.Duration
}

// Visible says whether a Deployment of this Cluster Autoscaler was read.
func (c ClusterAutoscaler) Visible() bool { return c.Name != "" }

// Ref names it in findings: "Deployment kube-system/cluster-autoscaler",
// or "(managed, if any)" for one no Deployment shows.
func (c ClusterAutoscaler) Ref() string {
	if !c.Visible() {
		return "(managed, if any)"
	}
	return "Deployment " + c.Namespace + "/" + c.Name
}

// Classify says how this Cluster Autoscaler treats a Ready node carrying
// key, and which of its rules decides it. CA checks its startup keys and
// prefixes before its status ones, so a key named both ways is startup.
func (c ClusterAutoscaler) Classify(key string) (Class, string) {
	switch {
	case slices.Contains(c.StartupTaints, key):
		return Startup, "--startup-taint"
	case strings.HasPrefix(key, CAStartupPrefix):
		return Startup, "prefix " + CAStartupPrefix
	case strings.HasPrefix(key, CAIgnorePrefix):
		return Startup, "prefix " + CAIgnorePrefix
	}
	for _, p := range c.StartupTaintPrefixes {
		if strings.HasPrefix(key, p) {
			return Startup, "--startup-taint-prefix=" + p
		}
	}
	switch {
	case slices.Contains(c.StatusTaints, key):
		return Status, "--status-taint"
	case strings.HasPrefix(key, CAStatusPrefix):
		return Status, "prefix " + CAStatusPrefix
	}
	return Unknown, "no flag or reserved prefix names it"
}

// NodePool is the part of a Karpenter NodePool (karpenter.sh/v1) that
// says how its nodes' taints are treated.
type NodePool struct {
	// Name is the NodePool's (cluster-scoped).
	Name string
	// StartupTaints are spec.template.spec.startupTaints: put on new nodes
	// and ignored until the node is initialized.
	StartupTaints []Taint
	// Taints are spec.template.spec.taints: put on new nodes for good.
	Taints []Taint
	// Karpenter is the controller that runs it: whether it ignores keys
	// under KarpenterEphemeralPrefix depends on its release.
	Karpenter Karpenter
}

// Ref names it in findings and commands: "nodepool/default".
func (p NodePool) Ref() string { return "nodepool/" + p.Name }

// Classify says how Karpenter treats t on a node of this NodePool that is
// not initialized yet, and why. Karpenter matches a startup or ephemeral
// taint by key and effect (a taint's identity), the readiness prefix by key,
// and only from v1.13.0: on an older Karpenter, or one whose version is
// unknown, a key under the prefix that the NodePool does not declare is
// permanent.
func (p NodePool) Classify(t Taint) (Class, string) {
	match := func(u Taint) bool { return u.Key == t.Key && u.Effect == t.Effect }
	switch {
	case slices.ContainsFunc(p.StartupTaints, match):
		return Startup, "spec.template.spec.startupTaints"
	case strings.HasPrefix(t.Key, KarpenterEphemeralPrefix):
		if class, rule := p.Karpenter.readinessRule(); class == Startup || !slices.ContainsFunc(p.Taints, match) {
			return class, rule
		}
	case slices.ContainsFunc(karpenterEphemeral, match):
		return Startup, "known ephemeral taint"
	}
	if slices.ContainsFunc(p.Taints, match) {
		return Permanent, "spec.template.spec.taints"
	}
	return Permanent, "not in spec.template.spec.startupTaints"
}

// index is where a taint with key sits in ts, or -1.
func index(ts []Taint, key string) int {
	return slices.IndexFunc(ts, func(t Taint) bool { return t.Key == key })
}
