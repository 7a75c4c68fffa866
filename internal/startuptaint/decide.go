// Package startuptaint decides the startup taint the webhook adds to a Node
// at its creation, and tells the nodes that joined without admission's
// decision. Decide is the one place the decision is made: every gate of
// docs/safety.md ("Taint a Node at creation") is in it.
package startuptaint

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/placement"
)

// Outcome is what admission did about a new node's startup taint; it is the
// value of api.StartupTaintAdmissionAnnotation on the node.
type Outcome string

const (
	// Off: injection is turned off; nothing is added, the node is not marked.
	Off Outcome = "off"
	// Added: the startup taint was added.
	Added Outcome = "added"
	// Present: the node already carried a startup key of ours (kubelet
	// --register-with-taints, a NodePool's startupTaints): nothing added.
	Present Outcome = "present"
	// NotSelected: the agent DaemonSet will not run on the node (node
	// selector, required node affinity, an untolerated taint), so nothing
	// would remove a taint: nothing added.
	NotSelected Outcome = "not-selected"
	// Observed: observe mode; the startup taint would have been added, and
	// was not. Its agent takes the node for a new one.
	Observed Outcome = api.StartupTaintObserved
	// NoKey: a node Karpenter launched whose NodePool declares none of our
	// keys, with a Karpenter that takes readiness.k8s.io/ keys for
	// permanent ones: any taint would make it launch more nodes.
	NoKey Outcome = "no-key"
)

// NodePoolLabel names the Karpenter NodePool that launched a node.
const NodePoolLabel = "karpenter.sh/nodepool"

// transientTaints are the taints a new node carries while its own lifecycle
// starts it, and loses without anyone of ours: the agent's pod is placed once
// they are gone, so they do not keep it off the node.
var transientTaints = []string{
	corev1.TaintNodeNotReady,
	corev1.TaintNodeUnreachable,
	"node.cloudprovider.kubernetes.io/uninitialized",
	"karpenter.sh/unregistered",
}

// Config is what the decision knows besides the node.
type Config struct {
	// Inject turns injection on (webhook.startupTaint.inject).
	Inject bool
	// Observe is observe mode: the decision is made and recorded
	// (Observed), the taint never added.
	Observe bool
	// Startup is the agent's startup taint (--agent-startup-taint).
	Startup corev1.Taint
	// Ours are every startup key the agents remove: Startup's, every
	// preset's and the previous keys. A node carrying one gets no second.
	Ours []string
	// Agent is the agent DaemonSet's pod placement (node selector,
	// affinity, tolerations), rendered by the chart from the values that
	// render the DaemonSet.
	Agent corev1.PodSpec
	// KarpenterReadinessKeys says the cluster's Karpenter (v1.13 and
	// later) ignores readiness.k8s.io/ keys until a node is initialized.
	KarpenterReadinessKeys bool
}

// NodePool is what Decide needs of the Karpenter NodePool that launched
// the node.
type NodePool struct {
	// Known is false when the NodePool could not be read (gone, forbidden,
	// Karpenter's API not served, too slow for admission).
	Known bool
	// StartupTaints are its spec.template.spec.startupTaints.
	StartupTaints []corev1.Taint
}

// Decision is the answer for one new node.
type Decision struct {
	Outcome Outcome
	// Taint is the taint to add; set only when Outcome is Added.
	Taint *corev1.Taint
	// Why says, for a person, why this outcome.
	Why string
}

// Decide says whether node, being created, gets a startup taint, and
// which. pool is read only for a node carrying NodePoolLabel. Observe mode
// and the suspend switch gate injection here too.
func Decide(cfg Config, node *corev1.Node, pool NodePool) Decision {
	if !cfg.Inject {
		return Decision{Outcome: Off, Why: "injection is off"}
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(cfg.Ours, t.Key) {
			return Decision{Outcome: Present, Why: "the node was created with " + t.Key}
		}
	}
	if !placement.DaemonPodRunsOn(&cfg.Agent, node, transientTaints) {
		return Decision{Outcome: NotSelected, Why: "the agent DaemonSet does not run on the node"}
	}
	taint, d := choose(cfg, node, pool)
	if taint == nil {
		return d
	}
	if !placement.Tolerates(&cfg.Agent, *taint) {
		return Decision{Outcome: NotSelected, Why: "the agent DaemonSet does not tolerate " + taint.Key}
	}
	if cfg.Observe {
		return Decision{Outcome: Observed, Why: d.Why + " would have been added; observe mode adds none"}
	}
	return Decision{Outcome: Added, Taint: taint, Why: d.Why}
}

// choose picks the key an autoscaler of the node treats as starting: on a
// node Karpenter launched, a key of ours its NodePool declares, else a
// readiness.k8s.io/ key (Karpenter v1.13+), never another.
func choose(cfg Config, node *corev1.Node, pool NodePool) (*corev1.Taint, Decision) {
	name, karpenter := node.Labels[NodePoolLabel]
	if !karpenter {
		t := cfg.Startup
		return &t, Decision{Why: "the configured startup taint"}
	}
	if pool.Known {
		for _, t := range pool.StartupTaints {
			if slices.Contains(cfg.Ours, t.Key) {
				t := t
				return &t, Decision{Why: "NodePool " + name + " declares it in startupTaints"}
			}
		}
	}
	if !cfg.KarpenterReadinessKeys {
		why := "NodePool " + name + " declares none of our keys in startupTaints"
		if !pool.Known {
			why = "NodePool " + name + " could not be read"
		}
		return nil, Decision{Outcome: NoKey, Why: why + ", and Karpenter before v1.13 takes any other taint for a permanent one"}
	}
	t := corev1.Taint{Key: api.KarpenterStartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	if strings.HasPrefix(cfg.Startup.Key, api.NodeReadinessTaintPrefix) {
		t = cfg.Startup
	}
	return &t, Decision{Why: "Karpenter waits for readiness.k8s.io/ keys to go"}
}
