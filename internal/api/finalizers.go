package api

import (
	"slices"
	"strings"
)

// shippedFinalizers are the names of the webhook's finalizer that this
// project has shipped: the only names the webhook's --legacy-finalizers
// accepts. A legacy name is stripped from every live node by back-fill and
// from every node by uninstall, so it must be one of ours: any other value
// (a typo, or another controller's finalizer such as
// karpenter.sh/termination) would take that controller's hold off every
// node. A release that renames Finalizer adds the old name here; the chart
// keeps the same list (templates/webhook-node-admissionpolicy.yaml,
// test/e2e/chart checks that they agree).
var shippedFinalizers = []string{
	Finalizer,
}

// ShippedFinalizers returns the finalizer names this project has shipped,
// the names --legacy-finalizers accepts.
func ShippedFinalizers() []string { return slices.Clone(shippedFinalizers) }

// IsShippedFinalizer reports whether name is a finalizer this project shipped.
func IsShippedFinalizer(name string) bool { return slices.Contains(shippedFinalizers, name) }

// ShippedFinalizersText lists the shipped names for messages: comma-separated,
// or "none".
func ShippedFinalizersText() string {
	if len(shippedFinalizers) == 0 {
		return "none"
	}
	return strings.Join(shippedFinalizers, ", ")
}

// HonouredFinalizers are the older names a webhook whose finalizer is
// current must honour: legacy (its --legacy-finalizers) and every shipped
// name, always, whatever its configuration says, less current itself. A
// shipped name is the project's own, so a rename rendered without Helm's
// lookup (helm template, Argo CD, Flux) still removes it after cleanup and
// replaces it on live nodes. Legacy names come first, each name once.
func HonouredFinalizers(current string, legacy []string) []string {
	var out []string
	for _, name := range slices.Concat(legacy, shippedFinalizers) {
		if name != current && name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
