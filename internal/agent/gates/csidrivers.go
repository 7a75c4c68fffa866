package gates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
)

// CSIDrivers is the CSI drivers gate: it passes when the node's CSINode
// lists every named driver, that is when the kubelet has registered each
// driver's node plugin. Until then the scheduler may place a pod with a
// volume of that driver on the node, and its mount fails ("driver name not
// found in the list of registered CSI drivers"). It reads one field-selected
// watch of the node's own CSINode.
type CSIDrivers struct {
	watchGate
	// Drivers are the CSI driver names to wait for, such as ebs.csi.aws.com.
	Drivers []string
}

// newCSIDrivers returns the gate reading source.
func newCSIDrivers(drivers []string, source objectSource) *CSIDrivers {
	g := &CSIDrivers{Drivers: drivers}
	g.source = source
	g.met = func() bool { return len(g.missing()) == 0 }
	return g
}

// Name implements Check.
func (*CSIDrivers) Name() string { return "csidrivers" }

// Run implements Check.
func (g *CSIDrivers) Run(context.Context) error {
	if !g.source.synced() {
		return errors.New("csidrivers: this node's CSINode not listed yet")
	}
	missing := g.missing()
	if len(missing) == 0 {
		return nil
	}
	if g.csiNode() == nil {
		return fmt.Errorf("csidrivers: no CSINode for this node yet (the kubelet creates it), waiting for %s", strings.Join(missing, ", "))
	}
	return fmt.Errorf("csidrivers: not registered on this node yet: %s", strings.Join(missing, ", "))
}

func (g *CSIDrivers) missing() []string { return MissingCSIDrivers(g.csiNode(), g.Drivers) }

// csiNode is the node's CSINode, or nil when it does not exist yet.
func (g *CSIDrivers) csiNode() *storagev1.CSINode {
	for _, o := range g.source.objects() {
		if n, ok := o.(*storagev1.CSINode); ok {
			return n
		}
	}
	return nil
}

// MissingCSIDrivers returns the drivers csiNode does not list (all of
// them when csiNode is nil), in the order given.
func MissingCSIDrivers(csiNode *storagev1.CSINode, drivers []string) []string {
	var missing []string
	for _, d := range drivers {
		if csiNode == nil || !slices.ContainsFunc(csiNode.Spec.Drivers, func(r storagev1.CSINodeDriver) bool { return r.Name == d }) {
			missing = append(missing, d)
		}
	}
	return missing
}
