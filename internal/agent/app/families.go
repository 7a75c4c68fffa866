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
func (c *Config) ResolveIPFamilies(ctx context.Context, src checks.ServiceCIDRGetter, log *slog.Logger) {
	if !c.autoFamilies {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.CheckTimeout)
	defer cancel()
	fams, err := checks.ClusterIPFamilies(ctx, src)
	if err != nil {
		c.families = checks.BothFamilies
		log.Warn("cannot tell the cluster's IP families; the dns and discovery checks accept addresses of either family (set --ip-families to choose)",
			"error", err, "ip_families", c.families.String())
		return
	}
	c.families = fams
	log.Info("IP families of the cluster's Service CIDRs", "ip_families", fams.String())
}

// IPFamilies are the checks' IP families: --ip-families as given, or as
// ResolveIPFamilies settled "auto"; both when "auto" was never resolved.
func (c *Config) IPFamilies() checks.IPFamilies {
	if c.families == nil {
		return checks.BothFamilies
	}
	return c.families
}

// autoFamilies reports whether --ip-families is "auto". Empty is "auto"
// too: what a chart upgraded with --reuse-values from a release that had no
// agent.ipFamilies renders, which must not stop every agent.
func (o *Options) autoFamilies() bool {
	return o.IPFamilies == checks.IPFamiliesAuto || o.IPFamilies == ""
}
