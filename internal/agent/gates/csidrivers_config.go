package gates

import (
	"context"
	"flag"
	"fmt"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// CSIDriversConfig configures the CSI drivers gate.
type CSIDriversConfig struct {
	// Drivers are the CSI drivers the node's CSINode must list before the
	// first untaint; the gate is on when there is one.
	Drivers flagenv.StringList
}

// Enabled implements GateConfig.
func (c *CSIDriversConfig) Enabled() bool { return len(c.Drivers) > 0 }

// AddFlags implements Config.
func (c *CSIDriversConfig) AddFlags(fs *flag.FlagSet) {
	fs.Var(&c.Drivers, "gate.csidrivers", "comma-separated CSI drivers (such as ebs.csi.aws.com) the node's CSINode must list, registered by the kubelet, before the first untaint")
}

// Validate implements Config.
func (c *CSIDriversConfig) Validate(bool) []error {
	return validateDriverNames("gate.csidrivers", c.Drivers)
}

// Build implements Config: the gate with the watch of the node's own
// CSINode (its name is the node's) that feeds it.
func (c *CSIDriversConfig) Build(d checks.Deps) checks.Check {
	w := &fieldWatch{
		log:      d.Log,
		selector: fields.OneTermEqualSelector("metadata.name", d.NodeName).String(),
		example:  &storagev1.CSINode{},
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return d.Kube.StorageV1().CSINodes().List(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return d.Kube.StorageV1().CSINodes().Watch(ctx, o)
		},
	}
	g := newCSIDrivers(c.Drivers, w)
	g.watch, w.changed = w, g.changed
	return g
}

// validateDriverNames refuses names that cannot be CSI or DRA drivers:
// both are DNS subdomains of at most 63 characters.
func validateDriverNames(flagName string, names []string) []error {
	var errs []error
	for _, n := range names {
		msgs := validation.IsDNS1123Subdomain(n)
		if len(n) > 63 {
			msgs = append(msgs, "must be no more than 63 characters")
		}
		if len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--%s: %q is not a driver name: %s", flagName, n, strings.Join(msgs, "; ")))
		}
	}
	return errs
}
