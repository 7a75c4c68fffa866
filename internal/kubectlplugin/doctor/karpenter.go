package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// KarpenterReadinessSince is the first Karpenter core release that ignores
// keys under KarpenterEphemeralPrefix until a node is initialized (commit
// "ignore NodeReadinessController taints in scheduling",
// pkg/scheduling/taints.go KnownEphemeralTaintKeyPrefixes). Older releases
// take such a key, undeclared, for a permanent taint like any other.
const KarpenterReadinessSince = "1.13.0"

// Karpenter is the Karpenter controller that runs a NodePool, as far as
// its Deployment shows it.
type Karpenter struct {
	// Deployment names it ("Deployment karpenter/karpenter"); empty when
	// none is visible: a managed Karpenter (EKS Auto Mode) or one in a
	// namespace the reader may not list.
	Deployment string `json:"deployment,omitempty"`
	// Version is its release as read ("1.14.1"); empty when unknown.
	Version string `json:"version,omitempty"`
	// VersionFrom says where Version was read: "its image <reference>",
	// or a label of its Deployment.
	VersionFrom string `json:"versionFrom,omitempty"`
}

// ReadinessPrefix says whether this Karpenter ignores keys under
// KarpenterEphemeralPrefix until initialization: known is false when its
// version could not be read, and then ignores is false too (the safe
// reading: declaring the key works on every release).
func (k Karpenter) ReadinessPrefix() (ignores, known bool) {
	v, ok := ParseKarpenterVersion(k.Version)
	if !ok {
		return false, false
	}
	since, _ := ParseKarpenterVersion(KarpenterReadinessSince)
	return !v.Less(since), true
}

// Named is "Karpenter v1.14.1", or "Karpenter (version unknown)".
func (k Karpenter) Named() string {
	if _, ok := ParseKarpenterVersion(k.Version); !ok {
		return "Karpenter (version unknown)"
	}
	return "Karpenter v" + strings.TrimPrefix(k.Version, "v")
}

// readinessRule is why a key under KarpenterEphemeralPrefix is startup or
// permanent on k, for the treatments' BECAUSE column.
func (k Karpenter) readinessRule() (Class, string) {
	switch ignores, known := k.ReadinessPrefix(); {
	case ignores:
		return Startup, "prefix " + KarpenterEphemeralPrefix + " (" + k.Named() + "; v" + KarpenterReadinessSince + " and later)"
	case known:
		return Permanent, "not in spec.template.spec.startupTaints; prefix " + KarpenterEphemeralPrefix + " only from v" +
			KarpenterReadinessSince + " (" + k.Named() + ")"
	}
	return Permanent, "not in spec.template.spec.startupTaints; prefix " + KarpenterEphemeralPrefix + " only from v" +
		KarpenterReadinessSince + ", Karpenter's version unknown"
}

// readinessDetail says, for a finding about a key under the prefix that k
// takes to stay, which releases ignore it and how k's version was read.
func (k Karpenter) readinessDetail() string {
	const since = "Only Karpenter v" + KarpenterReadinessSince + " and later ignore keys under " + KarpenterEphemeralPrefix +
		" until a node is initialized; older releases take an undeclared one to stay like any other taint."
	switch _, known := k.ReadinessPrefix(); {
	case known:
		return fmt.Sprintf("%s %s runs %s (its version read from %s).", since, k.Deployment, k.Named(), k.VersionFrom)
	case k.Deployment != "":
		return since + " The version of " + k.Deployment + " could not be read (neither its image's tag nor its " +
			"app.kubernetes.io/version or helm.sh/chart label names one), so doctor takes the older rule."
	}
	return since + " No Karpenter Deployment is visible (a managed Karpenter, or one in a namespace doctor may not list), " +
		"so its version is unknown and doctor takes the older rule."
}

// KarpenterVersion is a Karpenter release: major, minor, patch, and
// whether it is a pre-release (1.13.0-rc.1 comes before 1.13.0).
type KarpenterVersion struct {
	Major, Minor, Patch int
	Pre                 bool
}

// Less says whether v is an earlier release than w.
func (v KarpenterVersion) Less(w KarpenterVersion) bool {
	switch {
	case v.Major != w.Major:
		return v.Major < w.Major
	case v.Minor != w.Minor:
		return v.Minor < w.Minor
	case v.Patch != w.Patch:
		return v.Patch < w.Patch
	}
	return v.Pre && !w.Pre
}

// ParseKarpenterVersion reads a release as image tags and chart labels
// write it: 1.14.1, v1.14.1, 1.13.0-rc.1; ok is false for anything else
// (latest, a commit, a digest).
func ParseKarpenterVersion(s string) (v KarpenterVersion, ok bool) {
	s = strings.TrimPrefix(s, "v")
	s, _, _ = strings.Cut(s, "+") // build metadata does not order releases
	s, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(s, ".")
	if len(parts) != 3 || (hasPre && pre == "") {
		return KarpenterVersion{}, false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || p == "" || (len(p) > 1 && p[0] == '0') {
			return KarpenterVersion{}, false
		}
		n[i] = x
	}
	return KarpenterVersion{Major: n[0], Minor: n[1], Patch: n[2], Pre: hasPre}, true
}

// Oldest is the Karpenter of ks that ignores the readiness prefix least: one
// of unknown version before any known one, else the earliest release. The
// zero Karpenter (none visible, version unknown) when ks is empty.
func Oldest(ks []Karpenter) Karpenter {
	var out Karpenter
	for i, k := range ks {
		v, ok := ParseKarpenterVersion(k.Version)
		o, oldOK := ParseKarpenterVersion(out.Version)
		switch {
		case i == 0:
			out = k
		case !oldOK:
		case !ok || v.Less(o):
			out = k
		}
	}
	return out
}

// upgradeKarpenterFix is the other way out of a readiness key taken to stay.
const upgradeKarpenterFix = "upgrade Karpenter to v" + KarpenterReadinessSince + " or later, which ignores keys under " +
	KarpenterEphemeralPrefix + " until a node is initialized"

// readinessSeverity is how much a key under the prefix that k takes to
// stay counts: a problem, but advice when no Karpenter Deployment is
// visible (a managed one, as EKS Auto Mode's, whose release doctor cannot
// read: its findings are advice, as a managed Cluster Autoscaler's are).
func (k Karpenter) readinessSeverity() Severity {
	if _, known := k.ReadinessPrefix(); !known && k.Deployment == "" {
		return Advice
	}
	return Problem
}

// injectedReadinessKey records what goes wrong on p's nodes when the
// webhook adds the Karpenter preset's key at creation (p declares none of
// ours) and p's Karpenter takes that key to stay; nothing when it ignores
// it. t is the agent's startup taint, which declaring fixes it: the webhook
// then adds the declared key, as Karpenter does at registration.
func (d *Diagnosis) injectedReadinessKey(in Install, p NodePool, t Taint) {
	if ignores, _ := p.Karpenter.ReadinessPrefix(); ignores {
		return
	}
	injected := presetTaint(api.PresetKarpenter, RoleStartup)
	detail := "The webhook adds " + injected.String() + " at creation to the nodes Karpenter launches from this NodePool, which " +
		"declares none of our keys. " + p.Karpenter.readinessDetail() + " So while the agent holds a new node, the pending pods " +
		"are taken not to fit on it and Karpenter launches more, and it may consolidate the held node, which it counts as initialized. " +
		"On such a Karpenter set webhook.startupTaint.karpenterReadinessKeys=false (--karpenter-readiness-keys=false) and declare the key in every NodePool."
	d.Findings = append(d.Findings, Finding{Severity: p.Karpenter.readinessSeverity(), Autoscaler: "Karpenter " + p.Ref(), Role: RoleStartup,
		Key: injected.Key, Summary: "runaway launches: the key added at creation", Detail: detail,
		Fixes: []string{startupTaintFix(p, t, ""), upgradeKarpenterFix}})
}
