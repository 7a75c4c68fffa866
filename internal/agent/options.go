package agent

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	"github.com/kube-node-ready/kube-node-ready/internal/logging"
)

// EnvPrefix prefixes the environment twin of every agent flag.
const EnvPrefix = "KNR_AGENT"

// DefaultChecks are the checks enabled by default; probe needs targets.
var DefaultChecks = []string{"dns", "api", "network", "discovery"}

// Gate names: checks that are enabled by their own flags rather than
// --checks, and that are bootstrap checks unless --continuous-checks names them.
const (
	GateDaemonSets = "daemonsets"
	GateConditions = "conditions"
)

// Gates lists the gate names.
var Gates = []string{GateDaemonSets, GateConditions}

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
	// PodNamespace is the namespace of the agent and its headless Service.
	PodNamespace string
	// Kubeconfig is a kubeconfig path; empty means the in-cluster configuration.
	Kubeconfig string
	// MetricsAddr serves /metrics, /healthz and /readyz.
	MetricsAddr string
	// StartupTaint is key=value:Effect of the taint removed once verified.
	StartupTaint string
	// UnhealthyTaint is key=value:Effect of the taint a verified node gets
	// when its checks keep failing. Set it to StartupTaint to re-taint with
	// the startup taint instead (autoscalers then see a node that is still
	// starting, not a broken one).
	UnhealthyTaint string
	// VerifiedLabel is set to "true" when verified and "false" when re-tainted.
	VerifiedLabel string
	// SkipAnnotation set to "true" on the node untaints it at once and disables re-tainting.
	SkipAnnotation string
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
	// MaxRetainted caps re-tainted nodes in the cluster: a count ("5") or a share of all nodes ("10%"); at least 1.
	MaxRetainted string
	// DNSService is the cluster DNS Service (namespace/name), used by the
	// discovery and network checks.
	DNSService string
	// checks holds each known check's own configuration (flags, defaults,
	// validation), from checkTable.
	checks []checkRow
	// DaemonSetGate waits, before the first untaint, until the pods of the
	// DaemonSets that will run on this node are Ready.
	DaemonSetGate bool
	// DaemonSetExclude names DaemonSets (namespace/name, shell patterns) the gate does not wait for.
	DaemonSetExclude flagenv.StringList
	// DaemonSetExcludeSelector is a label selector of DaemonSets the gate does not wait for.
	DaemonSetExcludeSelector string
	// DaemonSetTimeout is how long the gate waits for one DaemonSet before it reports it and stops waiting; 0 waits for ever.
	DaemonSetTimeout time.Duration
	// RequireConditions are node conditions (Type=Status) that must hold before the first untaint.
	RequireConditions flagenv.StringList
	// AbsentConditions says what a required condition the node does not report means: "wait" or "pass".
	AbsentConditions string
	// LogLevel is debug, info, warn or error.
	LogLevel string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		PodNamespace:     "kube-node-ready",
		MetricsAddr:      ":8080",
		StartupTaint:     api.StartupTaint,
		UnhealthyTaint:   api.UnhealthyTaint,
		VerifiedLabel:    api.VerifiedLabel,
		SkipAnnotation:   api.SkipVerificationAnnotation,
		WaitForTaints:    flagenv.StringList{"karpenter.sh/unregistered"},
		Checks:           flagenv.StringList(slices.Clone(DefaultChecks)),
		ContinuousChecks: flagenv.StringList{ContinuousAll},
		CheckTimeout:     3 * time.Second,
		Period:           60 * time.Second,
		Jitter:           0.1,
		InitialBackoff:   time.Second,
		InitialTries:     5,
		RetaintThreshold: 3,
		RecoverThreshold: 2,
		MaxRetainted:     "10%",
		DaemonSetGate:    true,
		DaemonSetTimeout: 5 * time.Minute,
		AbsentConditions: "wait",
		DNSService:       "kube-system/kube-dns",
		checks:           checkTable(),
		LogLevel:         "info",
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
	fs.StringVar(&o.StartupTaint, "startup-taint", o.StartupTaint, "taint (key=value:Effect) removed once the node is verified")
	fs.StringVar(&o.UnhealthyTaint, "retaint-taint", o.UnhealthyTaint, "taint (key=value:Effect) put on a verified node whose checks keep failing; the startup taint is only ever removed unless this names it")
	fs.StringVar(&o.VerifiedLabel, "verified-label", o.VerifiedLabel, `label set to "true" when verified and "false" when re-tainted`)
	fs.StringVar(&o.SkipAnnotation, "skip-annotation", o.SkipAnnotation, `node annotation that, set to "true", untaints at once and disables re-tainting`)
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
	fs.StringVar(&o.MaxRetainted, "max-retainted", o.MaxRetainted, `most nodes re-tainted at once: a count ("5") or a share of all nodes ("10%"), at least 1`)
	fs.StringVar(&o.DNSService, "check.discovery.service", o.DNSService, "cluster DNS Service (namespace/name), for the discovery and network checks")
	for _, r := range o.checks {
		r.config.AddFlags(fs)
	}
	fs.BoolVar(&o.DaemonSetGate, "gate.daemonsets", o.DaemonSetGate, "before the first untaint, wait until the pods of the DaemonSets that will run on this node are Ready")
	fs.Var(&o.DaemonSetExclude, "gate.daemonsets.exclude", "comma-separated DaemonSets the gate does not wait for, as namespace/name (shell patterns: kube-system/*)")
	fs.StringVar(&o.DaemonSetExcludeSelector, "gate.daemonsets.exclude-selector", o.DaemonSetExcludeSelector, "label selector of DaemonSets the gate does not wait for")
	fs.DurationVar(&o.DaemonSetTimeout, "gate.daemonsets.timeout", o.DaemonSetTimeout, "how long one DaemonSet is waited for before it is reported and no longer waited for; 0 waits for ever")
	fs.Var(&o.RequireConditions, "require-conditions", "comma-separated node conditions (Type=Status, such as Ready=True,NetworkUnavailable=False) that must hold before the first untaint")
	fs.StringVar(&o.AbsentConditions, "require-conditions.absent", o.AbsentConditions, `what a required condition the node does not report means: "wait" (not met) or "pass"`)
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
}

// Parse registers the flags, applies environment twins, then parses args.
func (o *Options) Parse(fs *flag.FlagSet, args []string) error {
	o.AddFlags(fs)
	aliases := map[string][]string{"node-name": {"NODE_NAME"}, "pod-ip": {"POD_IP"}, "pod-name": {"POD_NAME"}, "pod-namespace": {"POD_NAMESPACE"}}
	if err := flagenv.Apply(fs, EnvPrefix, aliases); err != nil {
		return err
	}
	return fs.Parse(args)
}

// Validate reports every invalid option, naming the flag.
func (o *Options) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if o.NodeName == "" {
		bad("node-name", "required (set it from the downward API: spec.nodeName)")
	} else if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		bad("node-name", "%q is not a node name: %s", o.NodeName, strings.Join(msgs, "; "))
	}
	if o.PodIP != "" {
		if _, err := netip.ParseAddr(o.PodIP); err != nil {
			bad("pod-ip", "%v", err)
		}
	}
	if _, err := ParseTaint(o.StartupTaint); err != nil {
		bad("startup-taint", "%v", err)
	}
	if _, err := ParseTaint(o.UnhealthyTaint); err != nil {
		bad("retaint-taint", "%v", err)
	}
	if msgs := validation.IsQualifiedName(o.VerifiedLabel); len(msgs) > 0 {
		bad("verified-label", "%s", strings.Join(msgs, "; "))
	}
	if msgs := validation.IsQualifiedName(o.SkipAnnotation); len(msgs) > 0 {
		bad("skip-annotation", "%s", strings.Join(msgs, "; "))
	}
	if len(o.Checks) == 0 {
		bad("checks", "at least one check must be enabled")
	}
	for _, c := range o.Checks {
		if !slices.Contains(AllChecks, c) {
			bad("checks", "unknown check %q (known: %s)", c, strings.Join(AllChecks, ","))
		}
	}
	known := append(slices.Clone(AllChecks), Gates...)
	for _, c := range o.ContinuousChecks {
		switch {
		case c == ContinuousAll && len(o.ContinuousChecks) == 1:
		case c == ContinuousAll:
			bad("continuous-checks", "%q stands alone, not with check names", ContinuousAll)
		case !slices.Contains(known, c):
			bad("continuous-checks", "unknown check %q (known: %s)", c, strings.Join(known, ","))
		case !slices.Contains(o.Enabled(), c):
			bad("continuous-checks", "check %q is not enabled (--checks=%s; gates by --gate.daemonsets and --require-conditions)", c, o.Checks.String())
		}
	}
	for _, e := range o.DaemonSetExclude {
		if _, err := checks.ParseDaemonSetExclusion(e); err != nil {
			bad("gate.daemonsets.exclude", "%v", err)
		}
	}
	if _, err := labels.Parse(o.DaemonSetExcludeSelector); err != nil {
		bad("gate.daemonsets.exclude-selector", "%q: %v", o.DaemonSetExcludeSelector, err)
	}
	if o.DaemonSetTimeout < 0 {
		bad("gate.daemonsets.timeout", "must not be negative, got %s", o.DaemonSetTimeout)
	}
	for _, c := range o.RequireConditions {
		if _, err := checks.ParseConditionRequirement(c); err != nil {
			bad("require-conditions", "%v", err)
		}
	}
	if o.AbsentConditions != "wait" && o.AbsentConditions != "pass" {
		bad("require-conditions.absent", `want "wait" or "pass", got %q`, o.AbsentConditions)
	}
	if o.CheckTimeout <= 0 {
		bad("check-timeout", "must be positive, got %s", o.CheckTimeout)
	}
	if o.Period <= 0 {
		bad("check-period", "must be positive, got %s", o.Period)
	}
	if o.Jitter < 0 || o.Jitter >= 1 {
		bad("check-jitter", "must be in [0, 1), got %g", o.Jitter)
	}
	if o.InitialBackoff <= 0 {
		bad("initial-backoff", "must be positive, got %s", o.InitialBackoff)
	}
	if o.InitialTries < 1 {
		bad("initial-tries", "must be at least 1, got %d", o.InitialTries)
	}
	if o.RetaintThreshold < 1 {
		bad("retaint-threshold", "must be at least 1, got %d", o.RetaintThreshold)
	}
	if o.RecoverThreshold < 1 {
		bad("recover-threshold", "must be at least 1, got %d", o.RecoverThreshold)
	}
	if _, err := budget.Parse(o.MaxRetainted); err != nil {
		bad("max-retainted", "%v", err)
	}
	for _, r := range o.checks {
		errs = append(errs, r.config.Validate(slices.Contains(o.Checks, r.name))...)
	}
	if _, err := checks.ParseServiceRef(o.DNSService); err != nil {
		bad("check.discovery.service", "%v", err)
	}
	if _, err := logging.ParseLevel(o.LogLevel); err != nil {
		bad("log-level", "%v", err)
	}
	return errors.Join(errs...)
}

// Continuous reports whether the enabled check name is re-run every period
// once the node is verified. Gates are bootstrap checks unless named.
func (o *Options) Continuous(name string) bool {
	if slices.Contains(Gates, name) {
		return slices.Contains(o.ContinuousChecks, name)
	}
	return slices.Equal(o.ContinuousChecks, []string{ContinuousAll}) || slices.Contains(o.ContinuousChecks, name)
}

// Enabled lists the enabled checks and gates.
func (o *Options) Enabled() []string {
	out := slices.Clone([]string(o.Checks))
	if o.DaemonSetGate {
		out = append(out, GateDaemonSets)
	}
	if len(o.RequireConditions) > 0 {
		out = append(out, GateConditions)
	}
	return out
}

// ParseTaint parses key=value:Effect (value optional).
func ParseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("%q: want key=value:Effect", s)
	}
	key, value, _ := strings.Cut(kv, "=")
	t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return corev1.Taint{}, fmt.Errorf("%q: key: %s", s, strings.Join(msgs, "; "))
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("%q: effect must be NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	return t, nil
}
