package gates

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// ExtendedResources is the extended resources gate: it passes when each
// named resource (such as nvidia.com/gpu) is non-zero in the node's
// allocatable, that is when its device plugin has registered with the
// kubelet. Until then a GPU node takes pods that do not need its GPUs and
// none that do, and autoscalers count it as the wrong shape. It reads the
// node the agent already watches, so it costs no request.
type ExtendedResources struct {
	// Node returns the node as last seen; nil when it is not known yet.
	Node func() *corev1.Node
	// Required are the resource names to wait for.
	Required []corev1.ResourceName
}

// Name implements Check.
func (*ExtendedResources) Name() string { return "extendedresources" }

// Attach implements Gate: the gate reads the node the loop watches.
func (g *ExtendedResources) Attach(h checks.GateHost) { g.Node = h.Node }

// Start implements Gate; the node's own watch is all the gate needs.
func (*ExtendedResources) Start(context.Context, time.Duration) {}

// Stop implements Gate.
func (*ExtendedResources) Stop() {}

// Changed implements Gate: whether the resources became allocatable or
// stopped being so.
func (g *ExtendedResources) Changed(old, new *corev1.Node) bool {
	return (len(UnallocatableResources(old, g.Required)) == 0) != (len(UnallocatableResources(new, g.Required)) == 0)
}

// Run implements Check.
func (g *ExtendedResources) Run(context.Context) error {
	node := g.Node()
	if node == nil {
		return errors.New("extendedresources: node not seen yet")
	}
	if missing := UnallocatableResources(node, g.Required); len(missing) > 0 {
		return fmt.Errorf("extendedresources: %s", strings.Join(missing, ", "))
	}
	return nil
}

// UnallocatableResources describes each required resource that is not
// positive in node's allocatable, such as "nvidia.com/gpu not allocatable"
// or "nvidia.com/gpu allocatable is 0".
func UnallocatableResources(node *corev1.Node, required []corev1.ResourceName) []string {
	var out []string
	for _, r := range required {
		q, ok := node.Status.Allocatable[r]
		switch {
		case !ok:
			out = append(out, string(r)+" not allocatable")
		case q.Sign() <= 0:
			out = append(out, fmt.Sprintf("%s allocatable is %s", r, q.String()))
		}
	}
	return out
}
