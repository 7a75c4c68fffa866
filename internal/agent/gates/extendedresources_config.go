package gates

import (
	"flag"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// ExtendedResourcesConfig configures the extended resources gate.
type ExtendedResourcesConfig struct {
	// Require are resource names (such as nvidia.com/gpu) that must be
	// non-zero in the node's allocatable before the first untaint; the gate
	// is on when there is one.
	Require flagenv.StringList
}

// Enabled implements GateConfig.
func (c *ExtendedResourcesConfig) Enabled() bool { return len(c.Require) > 0 }

// AddFlags implements Config.
func (c *ExtendedResourcesConfig) AddFlags(fs *flag.FlagSet) {
	fs.Var(&c.Require, "gate.extendedresources", "comma-separated resources (such as nvidia.com/gpu) that must be non-zero in the node's allocatable, registered by their device plugins, before the first untaint")
}

// Validate implements Config: each name must be a resource name, that is
// a qualified name such as nvidia.com/gpu.
func (c *ExtendedResourcesConfig) Validate(bool) []error {
	var errs []error
	for _, r := range c.Require {
		if msgs := validation.IsQualifiedName(r); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--gate.extendedresources: %q is not a resource name: %s", r, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// Build implements Config.
func (c *ExtendedResourcesConfig) Build(checks.Deps) checks.Check {
	g := &ExtendedResources{}
	for _, r := range c.Require {
		g.Required = append(g.Required, corev1.ResourceName(r))
	}
	return g
}
