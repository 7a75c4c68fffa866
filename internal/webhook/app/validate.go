package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
)

// Validate reports every inconsistent option at once, each as
// "--flag: problem": Resolve without its result.
func (o *Options) Validate() error {
	_, err := o.Resolve()
	return err
}

// Resolve validates the options and, in the same pass, parses what the
// webhook is built from into a Config; every inconsistent option is
// reported at once, each as "--flag: problem".
func (o *Options) Resolve() (*Config, error) {
	var p cli.Problems
	c := &Config{Options: *o}
	o.validateServing(&p)
	o.validateCerts(&p)
	o.validateFinalizer(&p)
	if o.Cleanup {
		o.validateCleanup(&p)
	}
	c.Remediation, c.ReplaceOnlyReports = o.resolveRemediation(&p)
	c.StartupTaint = o.resolveStartupTaint(&p)
	o.validateMode(&p)
	o.validateLeaderElection(&p)
	o.validateExternalNames(&p)
	if o.KubeAPIQPS <= 0 {
		p.Add("kube-api-qps", "%v must be positive", o.KubeAPIQPS)
	}
	if o.KubeAPIBurst < 1 {
		p.Add("kube-api-burst", "%d must be at least 1", o.KubeAPIBurst)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

func (o *Options) validateServing(p *cli.Problems) {
	if o.MaxBodyBytes < 1024 {
		p.Add("max-body-bytes", "%d is below 1024", o.MaxBodyBytes)
	}
	p.Check("log-level", cli.LogLevel(o.LogLevel))
	if o.ListenAddress == "" {
		p.Add("listen-address", "must be set")
	}
	if o.MetricsAddress == "" {
		p.Add("metrics-bind-address", "must be set")
	}
}

func (o *Options) validateCerts(p *cli.Problems) {
	switch o.CertMode {
	case CertModeFiles:
		if o.TLSCertFile == "" || o.TLSKeyFile == "" {
			p.Add("tls-cert-file", "--cert-mode=files needs --tls-cert-file and --tls-key-file")
		}
		if o.TLSReloadInterval <= 0 {
			p.Add("tls-reload-interval", "%s must be positive", o.TLSReloadInterval)
		}
	case CertModeSelfManaged:
		if o.Namespace == "" || o.ServiceName == "" || o.CertSecretName == "" {
			p.Add("cert-mode", "self-managed needs --namespace, --service-name and --cert-secret")
		}
		if o.CertValidity <= 0 || o.CAValidity <= 0 || o.CertValidity > o.CAValidity {
			p.Add("cert-validity", "%s and --ca-validity (%s) must be positive, the certificate no longer than the CA", o.CertValidity, o.CAValidity)
		}
		if o.CertRenewBefore <= 0 || o.CertRenewBefore >= 1 {
			p.Add("cert-renew-before", "%v must be between 0 and 1", o.CertRenewBefore)
		}
		if o.CertSyncInterval <= 0 {
			p.Add("cert-sync-interval", "%s must be positive", o.CertSyncInterval)
		}
		if o.ClientCAFile != "" {
			p.Add("client-ca", "needs --cert-mode=files")
		}
	default:
		p.Add("cert-mode", "%q is not %s or %s", o.CertMode, CertModeSelfManaged, CertModeFiles)
	}
}

// validateFinalizer refuses a finalizer nothing would remove: no
// combination of flags strands a node.
func (o *Options) validateFinalizer(p *cli.Problems) {
	p.Check(api.FinalizerFlag, domainQualified(o.Finalizer))
	for _, f := range o.LegacyFinalizers {
		switch err := domainQualified(f); {
		case err != nil:
			p.Check(api.LegacyFinalizersFlag, err)
		case f == o.Finalizer:
			p.Add(api.LegacyFinalizersFlag, "%q is --finalizer itself", f)
		case !api.IsShippedFinalizer(f):
			// Back-fill strips a legacy name from every live node: a name
			// that is not ours would take another controller's hold off
			// every node.
			p.Add(api.LegacyFinalizersFlag, "%q is not a finalizer name kube-node-ready shipped, and would be removed from every node (accepted: %s)", f, api.ShippedFinalizersText())
		}
	}
	if o.Backfill && !o.Cleanup {
		// Admission-only replicas are fine (their cleanup runs elsewhere);
		// a back-filling one that never cleans up strands every node.
		p.Add("backfill", "adds --finalizer to every node but --cleanup=false runs nothing that removes it: pass --backfill=false too, or keep --cleanup")
	}
	if o.Backfill && o.BackfillWorkers < 1 {
		p.Add("backfill-workers", "%d must be at least 1", o.BackfillWorkers)
	}
	if o.Backfill && o.ResyncPeriod < 0 {
		p.Add("resync-period", "%s must not be negative", o.ResyncPeriod)
	}
	if o.CleanupWait < 0 {
		p.Add("cleanup-wait", "%s must not be negative", o.CleanupWait)
	}
}

// domainQualified checks a finalizer name: a qualified name with a DNS
// prefix (example.com/name), as the API server wants of finalizers.
func domainQualified(s string) error {
	if err := cli.QualifiedName(s); err != nil {
		return err
	}
	if !strings.Contains(s, "/") {
		return errors.New(`"` + s + `" has no prefix: want example.com/name`)
	}
	return nil
}

func (o *Options) validateCleanup(p *cli.Problems) {
	if o.CleanupWorkers < 1 {
		p.Add("cleanup-workers", "%d must be at least 1", o.CleanupWorkers)
	}
	if o.CleanupDeadline.IsSet && o.CleanupDeadline.D <= 0 {
		p.Add("cleanup-deadline", "%s must be positive (leave it out to turn the deadline off)", o.CleanupDeadline.D)
	}
	if o.CleanupDeadlineMinAttempts < 1 {
		p.Add("cleanup-deadline-min-attempts", "%d must be at least 1", o.CleanupDeadlineMinAttempts)
	}
	if o.CleanupRetryBase <= 0 {
		p.Add("cleanup-retry-base", "%s must be positive", o.CleanupRetryBase)
	}
	if o.CleanupRetryMax < o.CleanupRetryBase {
		p.Add("cleanup-retry-max", "%s must not be below --cleanup-retry-base (%s)", o.CleanupRetryMax, o.CleanupRetryBase)
	}
	if o.PluginHealthInterval < 0 {
		p.Add("plugin-health-interval", "%s must not be negative (0 turns probing off)", o.PluginHealthInterval)
	}
	if o.ConfigFile != "" && o.ConfigReloadInterval <= 0 {
		p.Add("config-reload-interval", "%s must be positive", o.ConfigReloadInterval)
	}
	p.Check(api.SkipCleanupAnnotationFlag, cli.QualifiedName(o.SkipAnnotation))
}

// resolveRemediation checks the remediation flags and returns remediation's
// configuration but for what needs the API server (node count, recorder,
// suspend switch); nil when --remediation=off or a flag is invalid.
// replaceOnlyReports: --remediation=replace in observe mode, which reports.
func (o *Options) resolveRemediation(p *cli.Problems) (_ *remediate.Config, replaceOnlyReports bool) {
	policy, err := remediate.ParsePolicy(o.Remediation)
	if err != nil {
		p.Check(api.RemediationFlag, err)
		return nil, false
	}
	if policy == remediate.PolicyOff {
		return nil, false
	}
	if o.UnverifiedDeadline.IsSet && o.UnverifiedDeadline.D <= 0 {
		p.Add(api.UnverifiedDeadlineFlag, "%s must be positive (leave it out for the --autoscaler preset's default)", o.UnverifiedDeadline.D)
	}
	if o.RemediationInterval <= 0 {
		p.Add("remediation-interval", "%s must be positive", o.RemediationInterval)
	}
	if o.RemediationStallAfter <= 0 {
		p.Add("remediation-stall-after", "%s must be positive", o.RemediationStallAfter)
	}
	maxReplacing, err := budget.Parse(o.MaxReplacing)
	p.Check("max-replacing", err)
	fleet, err := budget.Parse(o.FleetBudget)
	p.Check("agent-fleet-budget", err)
	threshold, err := remediate.ParseBreakerThreshold(o.RemediationBreakerThreshold)
	p.Check("remediation-breaker-threshold", err)
	if o.RemediationBreakerWindow < 1 {
		p.Add("remediation-breaker-window", "%d must be at least 1", o.RemediationBreakerWindow)
	}
	o.taintFlags().Check(p, api.AgentStartupTaintFlag, api.AgentUnhealthyTaintFlag)
	p.Check("agent-verified-label", cli.QualifiedName(o.VerifiedLabel))
	p.Check("agent-skip-verification-annotation", cli.QualifiedName(o.AgentSkipAnnotation))
	if o.ProtectAnnotation != "" { // empty: no node is protected
		p.Check("protect-annotation", cli.QualifiedName(o.ProtectAnnotation))
	}
	keys, err := o.taintKeys()
	if err != nil { // reported above by the taint flags' check
		return nil, false
	}
	if policy == remediate.PolicyReplace && o.observe() {
		policy, replaceOnlyReports = remediate.PolicyReport, true
	}
	return &remediate.Config{
		Policy:              policy,
		Deadline:            o.Deadline(),
		MaxReplacing:        maxReplacing,
		FleetBudget:         fleet,
		DryRun:              o.RemediationDryRun,
		Interval:            o.RemediationInterval,
		StallAfter:          o.RemediationStallAfter,
		StartupTaints:       append([]string{taintKey(keys.Startup)}, keys.PreviousStartup...),
		UnhealthyTaints:     append([]string{taintKey(keys.Unhealthy)}, keys.PreviousUnhealthy...),
		VerifiedLabel:       o.VerifiedLabel,
		AgentSkipAnnotation: o.AgentSkipAnnotation,
		ReplacingAnnotation: remediate.ReplacingAnnotation,
		ProtectAnnotation:   o.ProtectAnnotation,
		NodeClaims:          o.RemediationNodeClaims,
		Breaker:             remediate.Breaker{Threshold: threshold, Window: o.RemediationBreakerWindow},
		PoolLabel:           o.RemediationPoolLabel,
		ReplaceInService:    o.RemediationReplaceRetainted,
		Namespace:           o.Namespace,
		RetaintLease:        o.AgentRetaintLease,
	}, replaceOnlyReports
}

func (o *Options) validateLeaderElection(p *cli.Problems) {
	if !o.NeedsWatcher() || !o.LeaderElect {
		return
	}
	if o.LeaseName == "" {
		p.Add("leader-elect-lease-name", "must be set with --leader-elect")
	}
	if o.LeaseNS() == "" {
		p.Add("leader-elect-namespace", "must be set with --leader-elect (or --namespace)")
	}
	if o.RetryPeriod <= 0 || o.RenewDeadline <= o.RetryPeriod || o.LeaseDuration <= o.RenewDeadline {
		p.Add("leader-elect-lease-duration", "%s > --leader-elect-renew-deadline (%s) > --leader-elect-retry-period (%s) > 0 must hold", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
}

// validateExternalNames: each name fits an Event's action, which carries it.
func (o *Options) validateExternalNames(p *cli.Problems) {
	for _, n := range o.ExternalNames {
		if n == "" || len(n) > api.MaxExternalNameLength {
			p.Add(api.ExternalNamesFlag, "%q: want a name of 1 to %d characters", n, api.MaxExternalNameLength)
		}
	}
}

// Warnings are the deprecations, and what in a valid configuration works
// against the autoscaler: logged once at start-up.
func (o *Options) Warnings() []string {
	w := o.Deprecations()
	if o.Remediation != string(remediate.PolicyOff) && o.Autoscaler == api.PresetClusterAutoscaler && o.Deadline() > api.CAMaxNodeStartupTime {
		w = append(w, fmt.Sprintf("--unverified-deadline=%s is past Cluster Autoscaler's --max-node-provision-time and --max-node-startup-time (%s by default): "+
			"CA backs the node group off and counts the node unready before remediation acts; "+
			"set it below %s (the default under --autoscaler=%s is %s) unless CA's own flags were raised",
			o.Deadline(), api.CAMaxNodeStartupTime, api.CAMaxNodeStartupTime, api.PresetClusterAutoscaler, api.DefaultUnverifiedDeadline(api.PresetClusterAutoscaler)))
	}
	return w
}
