package gates

import (
	"context"
	"flag"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// DRAConfig configures the DRA gate.
type DRAConfig struct {
	// Drivers are the DRA drivers whose ResourceSlices for the node must be
	// published before the first untaint; the gate is on when there is one.
	Drivers flagenv.StringList
}

// Enabled implements GateConfig.
func (c *DRAConfig) Enabled() bool { return len(c.Drivers) > 0 }

// AddFlags implements Config.
func (c *DRAConfig) AddFlags(fs *flag.FlagSet) {
	fs.Var(&c.Drivers, "gate.dra", "comma-separated DRA drivers (such as gpu.nvidia.com) whose ResourceSlices for this node (resource.k8s.io/v1) must be published in full before the first untaint; fails, saying so, while the cluster does not serve resource.k8s.io/v1")
}

// Validate implements Config.
func (c *DRAConfig) Validate(bool) []error {
	return validateDriverNames("gate.dra", c.Drivers)
}

// Build implements Config: the gate with the watch of the ResourceSlices
// whose spec.nodeName is this node.
func (c *DRAConfig) Build(d checks.Deps) checks.Check {
	w := &fieldWatch{
		log:      d.Log,
		selector: fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, d.NodeName).String(),
		example:  &resourcev1.ResourceSlice{},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return d.Kube.ResourceV1().ResourceSlices().List(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return d.Kube.ResourceV1().ResourceSlices().Watch(ctx, o)
		},
		trim: trimResourceSlice,
	}
	g := newDRA(c.Drivers, w)
	g.watch, w.changed = w, g.changed
	g.Served = func(ctx context.Context) (bool, error) { return d.Resources.ResourceSlicesServed(ctx) }
	g.Log = d.Log
	return g
}

// trimResourceSlice keeps only what the gate reads: a node's slices can
// describe many devices with many attributes.
func trimResourceSlice(obj any) (any, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return obj, nil
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Spec:       resourcev1.ResourceSliceSpec{Driver: s.Spec.Driver, Pool: s.Spec.Pool, NodeName: s.Spec.NodeName},
	}, nil
}
