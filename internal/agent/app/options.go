// Package app is the agent binary's front: its options (flags with
// environment twins, validation), the table of checks and gates it builds
// from them, and the table the check command prints. The loop it feeds is
// package agent.
package app

import (
	"flag"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// EnvPrefix prefixes the environment twin of every agent flag.
const EnvPrefix = api.AgentEnvPrefix

// DefaultChecks are the checks enabled by default; probe needs targets.
var DefaultChecks = []string{"dns", "api", "network", "discovery"}

// ContinuousAll in --continuous-checks stands for every enabled check (gates aside).
const ContinuousAll = "all"

// Options configures the agent. Every field is a flag with an environment twin.
type Options struct {
	// NodeName is the node this agent verifies (downward API spec.nodeName).
	NodeName string
	// PodIP is this agent's pod address (downward API status.podIP); its own endpoint is never a peer.
	PodIP string
	// PodName is this agent's pod (downward API metadata.name); the DaemonSet gate never waits for its DaemonSet.
	PodName string
	// PodNamespace is the namespace of the agent, its headless Service and the re-taint Lease.
	PodNamespace string
	// Kubeconfig is a kubeconfig path; empty means the in-cluster configuration.
	Kubeconfig string
	// MetricsAddr serves /metrics, /healthz and /readyz.
	MetricsAddr string
	// ShutdownDelay is how long MetricsAddr keeps answering after SIGTERM.
	ShutdownDelay time.Duration
	// Autoscaler names the preset of taint keys (api.Presets) the
	// autoscaler in the cluster understands: it gives StartupTaint and
	// UnhealthyTaint when they are empty.
	Autoscaler string
	// StartupTaint is key=value:Effect of the taint removed once verified;
	// empty takes the Autoscaler preset's.
	StartupTaint string
	// UnhealthyTaint is key=value:Effect of the taint a verified node gets
	// when its checks keep failing; empty takes the Autoscaler preset's. Set
	// it to StartupTaint to re-taint with the startup taint instead
	// (autoscalers then see a node that is still starting, not a broken one).
	UnhealthyTaint string
	// PreviousTaintKeys are keys of taints an earlier configuration used, on
	// top of every preset's: a node carrying one is verified (and the key
	// removed) like one carrying the startup taint. Never added.
	PreviousTaintKeys flagenv.StringList
	// VerifiedLabel is set to "true" when verified and "false" when re-tainted.
	VerifiedLabel string
	// SkipVerificationAnnotation set to "true" on the node untaints it at once and disables re-tainting.
	SkipVerificationAnnotation string
	// WaitForTaints are taint keys (such as karpenter.sh/unregistered) that must be gone before the agent untaints.
	WaitForTaints flagenv.StringList
	// Checks are the enabled checks.
	Checks flagenv.StringList
	// ContinuousChecks are the enabled checks re-run every period once the
	// node is verified; only their failures re-taint it. The other enabled
	// checks are bootstrap checks: they must pass before the first untaint
	// and never run again on that node. "all" (the default) is every enabled
	// check; an empty list makes the agent bootstrap-only (it cannot re-taint).
	ContinuousChecks flagenv.StringList
	// CheckTimeout bounds each check.
	CheckTimeout time.Duration
	// Period is the interval between periodic rounds once verified.
	Period time.Duration
	// Jitter spreads periodic rounds by ±Jitter×Period.
	Jitter float64
	// InitialBackoff is the first retry delay of the start-up rounds; it doubles each try.
	InitialBackoff time.Duration
	// InitialTries is how many start-up rounds run on the backoff before falling back to Period.
	InitialTries int
	// RetaintThreshold is the number of consecutive failed rounds that re-taints the node.
	RetaintThreshold int
	// RecoverThreshold is the number of consecutive passed rounds that untaint a re-tainted node.
	RecoverThreshold int
	// RecoverInterval is the wait after a passed round of a re-tainted node
	// that needs more passed rounds, instead of Period (at most Period; 0
	// waits the period).
	RecoverInterval time.Duration
	// FleetBudget caps re-tainted nodes in the cluster: a count ("5") or a share of all nodes ("10%"); at least 1.
	FleetBudget string
	// DNSService is the cluster DNS Service (namespace/name), used by the
	// discovery and network checks.
	DNSService string
	// IPFamilies are the address families the dns and discovery checks ask
	// for: "auto" (those of the cluster's Service CIDRs, read at start-up),
	// ipv4, ipv6 or ipv4,ipv6; a name passes when it resolves in any of them.
	IPFamilies string
	// checks holds each known check's and gate's own configuration (flags,
	// defaults, validation), from checkTable.
	checks []checkRow
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// SuspendConfigMap is the operator's suspend switch in PodNamespace:
	// while it exists (or cannot be read) no re-taint is written.
	SuspendConfigMap string
	// Mode is enforce, observe or publish.
	Mode string
	// PublishConditions is what publish mode writes: one condition, or
	// also one per check.
	PublishConditions string
	// ReverifyAfterReboot holds a verified node whose boot ID changed since
	// it was verified with the startup taint until it verifies again.
	ReverifyAfterReboot bool
	// renames records the renamed flags the command line or environment used.
	renames *flagenv.Renames
}

// renamedFlags are the flags renamed since the last release: a released
// name keeps working, with a warning, until the next minor release. None
// since 0.1.0.
var renamedFlags []flagenv.Renamed

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		PodNamespace:               "kube-node-ready",
		MetricsAddr:                ":8080",
		ShutdownDelay:              3 * time.Second,
		Autoscaler:                 api.DefaultPreset,
		VerifiedLabel:              api.VerifiedLabel,
		SkipVerificationAnnotation: api.SkipVerificationAnnotation,
		WaitForTaints:              flagenv.StringList{"karpenter.sh/unregistered"},
		Checks:                     flagenv.StringList(slices.Clone(DefaultChecks)),
		ContinuousChecks:           flagenv.StringList{ContinuousAll},
		CheckTimeout:               3 * time.Second,
		Period:                     60 * time.Second,
		Jitter:                     0.1,
		InitialBackoff:             time.Second,
		InitialTries:               5,
		RetaintThreshold:           3,
		RecoverThreshold:           2,
		RecoverInterval:            10 * time.Second,
		FleetBudget:                "10%",
		DNSService:                 "kube-system/kube-dns",
		IPFamilies:                 checks.IPFamiliesAuto,
		checks:                     checkTable(),
		LogLevel:                   "info",
		SuspendConfigMap:           api.SuspendConfigMap,
		Mode:                       api.ModeEnforce,
		PublishConditions:          api.PublishOne,
	}
}

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "name of the node this agent verifies (required)")
	fs.StringVar(&o.PodIP, "pod-ip", o.PodIP, "this agent's pod IP; its own endpoint is never a pod-to-pod peer")
	fs.StringVar(&o.PodName, "pod-name", o.PodName, "this agent's pod name; the DaemonSet gate never waits for its own DaemonSet")
	fs.StringVar(&o.PodNamespace, "pod-namespace", o.PodNamespace, "namespace of the agent and its headless Service")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig path; empty uses the in-cluster configuration")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address serving /metrics, /healthz and /readyz")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "how long --metrics-bind-address (the other agents' pod-to-pod target) keeps answering after SIGTERM, with /readyz failing, so that their view of this pod's endpoint is updated before it stops; keep it 5s below the pod's termination grace period; 0 stops at once")
	fs.StringVar(&o.Autoscaler, api.AutoscalerFlag, o.Autoscaler, "preset of taint keys the cluster's autoscaler understands: "+strings.Join(api.PresetNames(), ", ")+"; gives --startup-taint and --unhealthy-taint when they are empty")
	fs.StringVar(&o.StartupTaint, api.StartupTaintFlag, o.StartupTaint, "taint (key=value:Effect) removed once the node is verified; empty takes the --autoscaler preset's")
	fs.StringVar(&o.UnhealthyTaint, api.UnhealthyTaintFlag, o.UnhealthyTaint, "taint (key=value:Effect) put on a verified node whose checks keep failing; empty takes the --autoscaler preset's; the startup taint is only ever removed unless this names it")
	fs.Var(&o.PreviousTaintKeys, api.PreviousTaintKeysFlag, "comma-separated keys of startup taints an earlier configuration used, on top of every preset's: a node carrying one is verified and the key removed with the startup taint; never added")
	fs.StringVar(&o.VerifiedLabel, "verified-label", o.VerifiedLabel, `label set to "true" when verified and "false" when re-tainted`)
	fs.StringVar(&o.SkipVerificationAnnotation, api.SkipVerificationAnnotationFlag, o.SkipVerificationAnnotation, `node annotation that, set to "true", untaints at once and disables re-tainting`)
	fs.Var(&o.WaitForTaints, "wait-for-taints", "comma-separated taint keys that must be gone from the node before it is untainted")
	fs.Var(&o.Checks, "checks", "comma-separated checks to run: "+strings.Join(AllChecks, ","))
	fs.Var(&o.ContinuousChecks, "continuous-checks", `comma-separated enabled checks re-run every period once verified (only they re-taint); the others run only until the first untaint; "all" is every enabled check, empty is bootstrap-only`)
	fs.DurationVar(&o.CheckTimeout, "check-timeout", o.CheckTimeout, "timeout of each check")
	fs.DurationVar(&o.Period, "check-period", o.Period, "interval between periodic rounds")
	fs.Float64Var(&o.Jitter, "check-jitter", o.Jitter, "spread of the period, as a fraction (0.1 is ±10%)")
	fs.DurationVar(&o.InitialBackoff, "initial-backoff", o.InitialBackoff, "first retry delay at start-up; doubles each try")
	fs.IntVar(&o.InitialTries, "initial-tries", o.InitialTries, "start-up rounds on the backoff before retrying every check-period")
	fs.IntVar(&o.RetaintThreshold, "retaint-threshold", o.RetaintThreshold, "consecutive failed rounds that re-taint the node")
	fs.IntVar(&o.RecoverThreshold, "recover-threshold", o.RecoverThreshold, "consecutive passed rounds that untaint a re-tainted node")
	fs.DurationVar(&o.RecoverInterval, "recover-interval", o.RecoverInterval, "wait after a passed round of a re-tainted node that needs more passed rounds (--recover-threshold), instead of --check-period: a node well again is untainted within about a period; failed rounds keep the period; at most --check-period, 0 waits the period")
	fs.StringVar(&o.FleetBudget, "fleet-budget", o.FleetBudget, `most nodes re-tainted at once: a count ("5") or a share of all nodes ("10%"), at least 1`)
	fs.StringVar(&o.DNSService, "check.discovery.service", o.DNSService, "cluster DNS Service (namespace/name), for the discovery and network checks")
	fs.StringVar(&o.IPFamilies, "ip-families", o.IPFamilies, `address families the dns and discovery checks ask for (A for ipv4, AAAA for ipv6), a name passing when it resolves in any: "auto" or empty (those of the cluster's Service CIDRs, from the ServiceCIDR "kubernetes", read at start-up; both when it cannot be read), ipv4, ipv6 or ipv4,ipv6`)
	for _, r := range o.checks {
		r.config.AddFlags(fs)
	}
	fs.StringVar(&o.Mode, api.ModeFlag, o.Mode, "enforce: taint and untaint the node; observe: run and record every check and what enforce would have done (condition, Events, node_ready_would_* metrics), never add a taint and remove ours at once, so no node is held; publish: a NodeReadinessRule of the node readiness controller owns the taint: publish the outcome as the condition only (False until every check and gate passed, False again where enforce would re-taint), never add a taint nor remove one under readiness.k8s.io/, remove the others of ours at once")
	fs.StringVar(&o.PublishConditions, "publish-conditions", o.PublishConditions, "with --mode=publish: one (the KubeNodeReady condition) or per-check (also node-ready/<check> for each enabled check, False while KubeNodeReady is False and that check failed)")
	fs.BoolVar(&o.ReverifyAfterReboot, api.ReverifyAfterRebootFlag, o.ReverifyAfterReboot, "hold a verified node whose boot ID (status.nodeInfo.bootID) differs from the one it was verified under with the startup taint and verified=false until every check and gate passes again, within the fleet budget, never while suspended or bypassed; in observe mode the hold is recorded (condition WouldHoldAfterReboot, Event, node_ready_would_taint_operations_total), never written; the boot ID is recorded in the node's condition")
	fs.StringVar(&o.SuspendConfigMap, api.SuspendConfigMapFlag, o.SuspendConfigMap, "the operator's suspend switch, a ConfigMap in --pod-namespace that kubectl node-ready suspend writes and resume deletes: while it exists, or cannot be read, no re-taint is written; untaints go on")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
}

// Parse registers the flags (and the old names of renamed ones), applies
// environment twins, then parses args.
func (o *Options) Parse(fs *flag.FlagSet, args []string) error {
	o.AddFlags(fs)
	o.renames = flagenv.AddRenamed(fs, renamedFlags)
	aliases := map[string][]string{"node-name": {"NODE_NAME"}, "pod-ip": {"POD_IP"}, "pod-name": {"POD_NAME"}, "pod-namespace": {"POD_NAMESPACE"}}
	if err := flagenv.Apply(fs, EnvPrefix, aliases); err != nil {
		return err
	}
	return fs.Parse(args)
}

// Validate reports every invalid option, naming the flag: Resolve without
// its result.
func (o *Options) Validate() error {
	_, err := o.Resolve()
	return err
}

// Resolve validates the options and resolves them, in one pass, into the
// Config the agent and its checks are built from; every invalid option is
// reported, naming the flag. Nothing after it reads the Options.
func (o *Options) Resolve() (*Config, error) {
	var p cli.Problems
	c := &Config{NodeName: o.NodeName, PodName: o.PodName, PodNamespace: o.PodNamespace, SuspendConfigMap: o.SuspendConfigMap,
		CheckTimeout: o.CheckTimeout, checksFlag: o.Checks.String(), autoFamilies: o.autoFamilies()}
	if o.Mode != api.ModeEnforce && o.Mode != api.ModeObserve && o.Mode != api.ModePublish {
		p.Add("mode", "%q is not a mode: %s, %s or %s", o.Mode, api.ModeEnforce, api.ModeObserve, api.ModePublish)
	}
	if o.PublishConditions != api.PublishOne && o.PublishConditions != api.PublishPerCheck {
		p.Add("publish-conditions", "%q is neither %s nor %s", o.PublishConditions, api.PublishOne, api.PublishPerCheck)
	}
	if o.Mode == api.ModePublish && o.ReverifyAfterReboot {
		// The hold is a taint; in publish mode a rule owns the taint.
		p.Add("reverify-after-reboot", "not with --mode=publish: the agent adds no taint there")
	}
	if o.NodeName == "" {
		p.Add("node-name", "required (set it from the downward API: spec.nodeName)")
	} else if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		p.Add("node-name", "%q is not a node name: %s", o.NodeName, strings.Join(msgs, "; "))
	}
	if o.PodIP != "" {
		var err error
		c.PodIP, err = netip.ParseAddr(o.PodIP)
		p.Check("pod-ip", err)
	}
	o.taintFlags().Check(&p, api.StartupTaintFlag, api.UnhealthyTaintFlag)
	taints, taintsErr := o.taints()
	if t := taints; taintsErr == nil && o.ReverifyAfterReboot && t.Startup.Key == t.Unhealthy.Key {
		// A node held after a reboot is told from a re-tainted one by its taint.
		p.Add("reverify-after-reboot", "needs an --unhealthy-taint with another key than --startup-taint (%s)", t.Startup.Key)
	}
	p.Check("verified-label", cli.QualifiedName(o.VerifiedLabel))
	p.Check(api.SkipVerificationAnnotationFlag, cli.QualifiedName(o.SkipVerificationAnnotation))
	o.validateChecks(&p)
	if o.ShutdownDelay < 0 {
		p.Add("shutdown-delay", "must not be negative, got %s", o.ShutdownDelay)
	}
	if o.CheckTimeout <= 0 {
		p.Add("check-timeout", "must be positive, got %s", o.CheckTimeout)
	}
	if o.Period <= 0 {
		p.Add("check-period", "must be positive, got %s", o.Period)
	}
	if o.Jitter < 0 || o.Jitter >= 1 {
		p.Add("check-jitter", "must be in [0, 1), got %g", o.Jitter)
	}
	if o.InitialBackoff <= 0 {
		p.Add("initial-backoff", "must be positive, got %s", o.InitialBackoff)
	}
	if o.InitialTries < 1 {
		p.Add("initial-tries", "must be at least 1, got %d", o.InitialTries)
	}
	if o.RetaintThreshold < 1 {
		p.Add("retaint-threshold", "must be at least 1, got %d", o.RetaintThreshold)
	}
	if o.RecoverThreshold < 1 {
		p.Add("recover-threshold", "must be at least 1, got %d", o.RecoverThreshold)
	}
	if o.RecoverInterval < 0 {
		p.Add("recover-interval", "must not be negative, got %s", o.RecoverInterval)
	}
	fleetBudget, err := budget.Parse(o.FleetBudget)
	p.Check("fleet-budget", err)
	c.DNSService, err = endpoints.ParseServiceRef(o.DNSService)
	p.Check("check.discovery.service", err)
	if !c.autoFamilies {
		c.families, err = checks.ParseIPFamilies(o.IPFamilies)
		p.Check("ip-families", err)
	}
	p.Check("log-level", cli.LogLevel(o.LogLevel))
	if msgs := validation.IsDNS1123Subdomain(o.SuspendConfigMap); len(msgs) > 0 {
		p.Add(api.SuspendConfigMapFlag, "%q is not a ConfigMap name: %s", o.SuspendConfigMap, strings.Join(msgs, "; "))
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	if taintsErr != nil { // reported above by the taint flags' check
		return nil, taintsErr
	}
	c.Enabled = o.Enabled()
	for _, r := range o.checks {
		if o.enabled(r) {
			c.rows = append(c.rows, r)
		}
	}
	c.AgentTaints = slices.Concat([]string{taints.Startup.Key, taints.Unhealthy.Key}, taints.PreviousStartup, taints.PreviousUnhealthy, o.WaitForTaints)
	c.Agent = o.agentConfig(taints, fleetBudget)
	return c, nil
}

// validateChecks checks --checks, --continuous-checks and each row's own flags.
func (o *Options) validateChecks(p *cli.Problems) {
	if len(o.Checks) == 0 {
		p.Add("checks", "at least one check must be enabled")
	}
	for _, c := range o.Checks {
		if !slices.Contains(AllChecks, c) {
			p.Add("checks", "unknown check %q (known: %s)", c, strings.Join(AllChecks, ","))
		}
	}
	known := append(slices.Clone(AllChecks), Gates...)
	for _, c := range o.ContinuousChecks {
		switch {
		case c == ContinuousAll && len(o.ContinuousChecks) == 1:
		case c == ContinuousAll:
			p.Add("continuous-checks", "%q stands alone, not with check names", ContinuousAll)
		case !slices.Contains(known, c):
			p.Add("continuous-checks", "unknown check %q (known: %s)", c, strings.Join(known, ","))
		case !slices.Contains(o.Enabled(), c):
			p.Add("continuous-checks", "check %q is not enabled (--checks=%s; gates by --gate.daemonsets, --require-conditions, --gate.csidrivers, --gate.extendedresources and --gate.dra)", c, o.Checks.String())
		}
	}
	for _, r := range o.checks {
		p.Append(r.config.Validate(o.enabled(r))...)
	}
}

// Deprecations says, once per old flag name the command line or the
// environment used, which flag replaces it: logged at start-up.
func (o *Options) Deprecations() []string {
	return o.renames.Warnings()
}

// Continuous reports whether the enabled check name is re-run every period
// once the node is verified. Gates are bootstrap checks unless named.
func (o *Options) Continuous(name string) bool {
	if slices.Contains(Gates, name) {
		return slices.Contains(o.ContinuousChecks, name)
	}
	return slices.Equal(o.ContinuousChecks, []string{ContinuousAll}) || slices.Contains(o.ContinuousChecks, name)
}

// Enabled lists the enabled checks, then the enabled gates.
func (o *Options) Enabled() []string {
	out := slices.Clone([]string(o.Checks))
	for _, r := range o.checks {
		if r.gate() != nil && r.gate().Enabled() {
			out = append(out, r.name)
		}
	}
	return out
}

// taintFlags are the flags that give the taints.
func (o *Options) taintFlags() cli.TaintFlags {
	return cli.TaintFlags{Autoscaler: o.Autoscaler, Startup: o.StartupTaint, Unhealthy: o.UnhealthyTaint, Previous: o.PreviousTaintKeys}
}

// taints resolves the startup and unhealthy taints and the previous keys.
func (o *Options) taints() (agent.Taints, error) {
	keys, err := o.taintFlags().Resolve()
	if err != nil {
		return agent.Taints{}, err
	}
	startup, err := cli.ParseTaint(keys.Startup)
	if err != nil {
		return agent.Taints{}, err
	}
	unhealthy, err := cli.ParseTaint(keys.Unhealthy)
	if err != nil {
		return agent.Taints{}, err
	}
	return agent.Taints{Startup: startup, Unhealthy: unhealthy,
		PreviousStartup: keys.PreviousStartup, PreviousUnhealthy: keys.PreviousUnhealthy}, nil
}

// agentConfig is the loop's configuration, from the options Resolve
// checked and the values it parsed.
func (o *Options) agentConfig(taints agent.Taints, fleetBudget budget.Budget) agent.Config {
	var continuous []string
	for _, c := range o.Enabled() {
		if o.Continuous(c) {
			continuous = append(continuous, c)
		}
	}
	return agent.Config{
		NodeName:         o.NodeName,
		LeaseNamespace:   o.PodNamespace,
		Taints:           taints,
		VerifiedLabel:    o.VerifiedLabel,
		BypassAnnotation: o.SkipVerificationAnnotation,
		WaitForTaints:    slices.Clone([]string(o.WaitForTaints)),
		Continuous:       continuous,
		CheckTimeout:     o.CheckTimeout,
		Period:           o.Period,
		Jitter:           o.Jitter,
		InitialBackoff:   o.InitialBackoff,
		InitialTries:     o.InitialTries,
		Thresholds:       agent.Thresholds{Retaint: o.RetaintThreshold, Recover: o.RecoverThreshold},
		RecoverInterval:  o.RecoverInterval,
		FleetBudget:      fleetBudget,
		FleetBudgetFlag:  "--fleet-budget=" + o.FleetBudget,
		Observe:          o.Mode == api.ModeObserve,
		Publish:          o.Mode == api.ModePublish,
		PublishPerCheck:  o.PublishConditions == api.PublishPerCheck,

		ReverifyAfterReboot: o.ReverifyAfterReboot,
		Clock:               clock.RealClock{},
	}
}
