package app

import (
	"context"
	"log/slog"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// ResolveIPFamilies settles --ip-families=auto before the checks are built:
// one read of the default ServiceCIDR, bounded by the check timeout. When it
// cannot be read (an API server before Kubernetes 1.33, RBAC, the API not
// reachable yet) the checks ask for both families, so a node of an IPv6 or
// dual-stack cluster still verifies, and the agent says so once. An explicit
// --ip-families is used as given, without a read.
func (o *Options) ResolveIPFamilies(ctx context.Context, c checks.ServiceCIDRGetter, log *slog.Logger) {
	if !o.autoFamilies() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, o.CheckTimeout)
	defer cancel()
	fams, err := checks.ClusterIPFamilies(ctx, c)
	if err != nil {
		o.ipFamilies = checks.BothFamilies
		log.Warn("cannot tell the cluster's IP families; the dns and discovery checks accept addresses of either family (set --ip-families to choose)",
			"error", err, "ip_families", o.ipFamilies.String())
		return
	}
	o.ipFamilies = fams
	log.Info("IP families of the cluster's Service CIDRs", "ip_families", fams.String())
}

// families are the checks' IP families: --ip-families as given, or as
// ResolveIPFamilies settled "auto"; both when "auto" was never resolved.
func (o *Options) families() checks.IPFamilies {
	if o.autoFamilies() {
		if o.ipFamilies == nil {
			return checks.BothFamilies
		}
		return o.ipFamilies
	}
	fams, err := checks.ParseIPFamilies(o.IPFamilies)
	if err != nil { // Validate refused it already
		return checks.BothFamilies
	}
	return fams
}

// autoFamilies reports whether --ip-families is "auto". Empty is "auto"
// too: what a chart upgraded with --reuse-values from a release that had no
// agent.ipFamilies renders, which must not stop every agent.
func (o *Options) autoFamilies() bool {
	return o.IPFamilies == checks.IPFamiliesAuto || o.IPFamilies == ""
}
