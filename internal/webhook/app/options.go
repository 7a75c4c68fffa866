package app

import (
	"net"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/admission"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
)

// Certificate modes.
const (
	// CertModeSelfManaged keeps a CA and serving certificate in a Secret and
	// writes the CA bundle into the MutatingWebhookConfiguration.
	CertModeSelfManaged = "self-managed"
	// CertModeFiles serves certificate files written by someone else (cert-manager).
	CertModeFiles = "files"
)

// EnvPrefix prefixes every flag's environment twin: --cert-mode is
// KNR_WEBHOOK_CERT_MODE, as --check-period is KNR_AGENT_CHECK_PERIOD.
const EnvPrefix = api.WebhookEnvPrefix

// Options configures kube-node-ready-webhook.
type Options struct {
	// ListenAddress is where the TLS admission endpoint listens.
	ListenAddress string
	// MetricsAddress serves /metrics, /healthz and /readyz over plain HTTP
	// (--metrics-bind-address, as the agent's).
	MetricsAddress string
	// Finalizer is added to every new Node.
	Finalizer string
	// LegacyFinalizers are older names of Finalizer that this project wrote:
	// cleanup and remove-finalizers remove them too, and back-fill replaces
	// them, so renaming the finalizer never strands a node. Only names in
	// api.ShippedFinalizers are accepted: anything else would be stripped
	// from every node. The shipped names are honoured whether given or not
	// (api.HonouredFinalizers), so a chart rendered without lookup strands
	// none of them.
	LegacyFinalizers []string
	// MaxBodyBytes bounds an admission request body.
	MaxBodyBytes int64
	// Kubeconfig is a kubeconfig file; empty means in-cluster configuration.
	Kubeconfig string
	// LogLevel is debug, info, warn or error.
	LogLevel string

	// CertMode is self-managed or files.
	CertMode string
	// TLSCertFile and TLSKeyFile are the serving pair in files mode.
	TLSCertFile, TLSKeyFile string
	// ClientCAFile, when set, makes the server require a client certificate
	// (the API server's) that chains to this bundle.
	ClientCAFile string
	// TLSReloadInterval is how often the files are checked for changes.
	TLSReloadInterval time.Duration

	// Namespace holds the certificate Secret and the Service.
	Namespace string
	// ServiceName is the webhook's Service; its DNS names go into the certificate.
	ServiceName string
	// CertSecretName is the Secret that holds the self-managed CA and
	// certificate. It is expected to exist (the chart creates it empty); the
	// webhook creates it only where it may.
	CertSecretName string
	// ExtraSANs are more DNS names or IP addresses for the serving certificate.
	ExtraSANs []string
	// WebhookConfigName is the MutatingWebhookConfiguration that receives the
	// CA bundle; empty leaves the bundle alone.
	WebhookConfigName string
	// CAValidity and CertValidity are the lifetimes of new certificates.
	CAValidity, CertValidity time.Duration
	// CertRenewBefore is the fraction of a certificate's lifetime left at which it is renewed.
	CertRenewBefore float64
	// CertSyncInterval is how often the Secret and the bundle are checked.
	CertSyncInterval time.Duration

	// Backfill turns on the informer that adds the finalizer to Nodes without it.
	Backfill bool
	// BackfillWorkers is the number of back-fill workers: the most
	// back-fill patches in flight at once. Eight keep KubeAPIQPS's 300
	// requests/s busy while the API server takes up to 25 ms a patch; on a
	// slower one they, not the rate, bound the load back-fill adds.
	BackfillWorkers int
	// ResyncPeriod is how often the informer re-examines every cached Node.
	ResyncPeriod time.Duration
	// ShutdownGrace bounds how long in-flight requests may finish on SIGTERM.
	ShutdownGrace time.Duration

	// Cleanup runs the cleanup plugins when a Node with the finalizer is
	// deleted, and removes the finalizer afterwards.
	Cleanup bool
	// ConfigFile is the cleanup configuration (YAML, from a ConfigMap); empty
	// means the built-in defaults (only the log plugin).
	ConfigFile string
	// ConfigReloadInterval is how often ConfigFile is checked for changes.
	ConfigReloadInterval time.Duration
	// SecretsDir is where the plugins' secret files must be (the chart mounts
	// its Secret there); a configuration naming a file elsewhere is invalid.
	SecretsDir string
	// CleanupWorkers bounds how many Nodes are cleaned up at once.
	CleanupWorkers int
	// CleanupRetryBase and CleanupRetryMax shape the per-node exponential
	// backoff after a failed cleanup.
	CleanupRetryBase, CleanupRetryMax time.Duration
	// CleanupDeadline, when given, bounds how long failing critical plugins
	// hold a deleted Node (from its deletionTimestamp); past it the finalizer
	// is removed anyway with a Warning Event. Off unless given.
	CleanupDeadline flagenv.OptionalDuration
	// CleanupDeadlineMinAttempts is how many failed attempts the deadline
	// also waits for, each of which called every critical plugin or left
	// one out because a health probe newer than the node's previous attempt
	// failed: time alone, such as a webhook outage longer than the deadline,
	// never releases a node.
	CleanupDeadlineMinAttempts int
	// PluginHealthInterval is how often plugins with a health probe are
	// probed (they are also probed before a cleanup starts); 0 turns probing off.
	PluginHealthInterval time.Duration
	// DryRun makes every plugin report instead of act (finalizers are still removed).
	DryRun bool
	// SkipAnnotation set to "true" on a Node removes the finalizer without
	// cleanup (--skip-cleanup-annotation).
	SkipAnnotation string
	// CleanupWait bounds how long remove-finalizers waits for cleanups in
	// progress to finish before it strips their finalizer anyway; 0 waits not.
	CleanupWait time.Duration
	// FinalizerRecord is the ConfigMap in Namespace that records the
	// finalizer names of this release (the chart's <webhook>-finalizers,
	// rendered whenever the webhook is and never pruned). The webhook writes
	// Finalizer into it before adding it anywhere, and refuses to start
	// while nodes carry a custom name it used before and may not remove.
	// remove-finalizers then removes only this release's names, the
	// record's included, and only when its webhook ran here (the record or
	// the leader Lease exists). Empty: no record; remove-finalizers removes
	// the names given, unconditionally.
	FinalizerRecord string

	// LeaderElect makes replicas elect one leader that back-fills and cleans up.
	LeaderElect bool
	// LeaseName and LeaseNamespace locate the leader Lease (namespace empty = Namespace).
	LeaseName, LeaseNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod are the election timings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// PodName identifies this replica (Lease holder, Events about the
	// configuration); empty means the host name.
	PodName string
	// ExternalNames are the agents' --check.dns.external-names: resolved from
	// this pod every minute, each outcome an Event on the Pod that
	// `kubectl node-ready doctor` reads (externalnames.go); empty: none.
	ExternalNames []string
	// PeerService is the agents' --check.network.peer-service, in
	// Namespace: admission names the first of its EndpointSlices a new
	// node's agent would follow (api.PeerSlicesAnnotation); empty: no hint.
	PeerService string
	// Remediation is the policy for nodes unverified past UnverifiedDeadline:
	// off, report or replace (see package remediate).
	Remediation string
	// UnverifiedDeadline is how long a node may carry the startup or
	// unhealthy taint; unset, it depends on Autoscaler (Deadline).
	UnverifiedDeadline flagenv.OptionalDuration
	// MaxReplacing bounds nodes replaced and still present ("1", "10%").
	MaxReplacing string
	// RemediationDryRun reports what would be deleted.
	RemediationDryRun bool
	// RemediationInterval is the time between scans.
	RemediationInterval time.Duration
	// RemediationStallAfter is the least time a node marked as replacing
	// may stay before its replacement is tried again (remediate.Config.StallAfter;
	// the wait is at least 2×RemediationInterval).
	RemediationStallAfter time.Duration
	// FleetBudget is the agents' --fleet-budget; while it is used up nothing
	// is replaced.
	FleetBudget string
	// RemediationNodeClaims deletes a node's Karpenter NodeClaim instead of the Node.
	RemediationNodeClaims bool
	// RemediationBreakerThreshold is the share ("50%") of the latest
	// RemediationBreakerWindow new nodes that, never verified, stops
	// replacements until a new node verifies; "off" turns the breaker off.
	RemediationBreakerThreshold string
	// RemediationBreakerWindow is how many of the latest new nodes count.
	RemediationBreakerWindow int
	// RemediationPoolLabel is the node label naming a node's pool, each pool
	// with a circuit breaker of its own; empty: remediate.PoolLabels.
	RemediationPoolLabel string
	// RemediationReplaceRetainted lets remediation replace a node that
	// verified once and was re-tainted, only by deleting its Karpenter
	// NodeClaim (Karpenter drains it); off: such a node is only reported.
	RemediationReplaceRetainted bool
	// Autoscaler is the agents' --autoscaler: the preset of taint keys
	// (api.Presets) that gives StartupTaint and UnhealthyTaint when they are
	// empty, and the default of UnverifiedDeadline.
	Autoscaler string
	// StartupTaint and UnhealthyTaint are the agent's taints, key=value:Effect
	// as its --startup-taint and --unhealthy-taint take them; only their keys
	// are read here. Empty takes the Autoscaler preset's.
	StartupTaint, UnhealthyTaint string
	// PreviousTaintKeys are the agents' --previous-taint-keys: a node
	// carrying one, or any preset's key, not verified, is unverified.
	PreviousTaintKeys []string
	// VerifiedLabel is the agent's --verified-label.
	VerifiedLabel string
	// SuspendConfigMap is the operator's suspend switch in Namespace: while
	// it exists, or cannot be read, nothing is replaced and no startup
	// taint added; empty: no switch.
	SuspendConfigMap string
	// AgentSkipAnnotation is the agent's bypass annotation (its
	// --skip-verification-annotation): a bypassed node is never replaced and
	// does not count against the fleet budget.
	AgentSkipAnnotation string
	// AgentRetaintLease is the agents' re-taint Lease in Namespace: while an
	// agent was refused a re-taint by the fleet budget within the deadline,
	// nothing is replaced. Empty: not read.
	AgentRetaintLease string
	// ProtectAnnotation set to "true" keeps a node from being replaced.
	ProtectAnnotation string

	// Mode is enforce, observe or publish (mode.go): in observe mode
	// admission adds no taint and remediation only reports; publish is
	// enforce here (the chart decides whether admission injects).
	Mode string

	// InjectStartupTaint makes admission add the startup taint to every new
	// Node the agent DaemonSet will run on (startuptaint.Decide), and mark
	// each with its decision; the leader names the nodes that joined
	// without it.
	InjectStartupTaint bool
	// AgentPlacement is the agent DaemonSet's pod placement as JSON of a
	// PodSpec's nodeSelector, affinity and tolerations: the chart renders
	// it from the values that render the DaemonSet.
	AgentPlacement string
	// KarpenterReadinessKeys says Karpenter, if any, is v1.13 or later and
	// ignores readiness.k8s.io/ keys until a node is initialized; false: a
	// node of a NodePool declaring none of our keys gets no taint.
	KarpenterReadinessKeys bool

	// KubeAPIQPS and KubeAPIBurst are the client-side rate limits of the
	// API client (Events use a separate client with the same limits). At
	// 300/600 the back-fill of 10 000 nodes created while no replica ran
	// (one patch each) has its floor at 31 s; at 200/400 it was 48 s, at
	// 50/100 200 s (docs/benchmarks.md, "Fleet scale").
	KubeAPIQPS   float64
	KubeAPIBurst int

	// renames records the old flag names used (Deprecations).
	renames *flagenv.Renames
}

// NewOptions returns the documented defaults.
func NewOptions() *Options {
	return &Options{
		ListenAddress:     ":8443",
		MetricsAddress:    ":8080",
		Finalizer:         api.Finalizer,
		MaxBodyBytes:      admission.DefaultMaxBodyBytes,
		LogLevel:          "info",
		CertMode:          CertModeSelfManaged,
		TLSCertFile:       "/etc/kube-node-ready/tls/tls.crt",
		TLSKeyFile:        "/etc/kube-node-ready/tls/tls.key",
		TLSReloadInterval: 10 * time.Second,
		Namespace:         "kube-system",
		ServiceName:       "kube-node-ready-webhook",
		CertSecretName:    "kube-node-ready-webhook-certs",
		WebhookConfigName: "kube-node-ready-webhook",
		CAValidity:        5 * 365 * 24 * time.Hour,
		CertValidity:      365 * 24 * time.Hour,
		CertRenewBefore:   1.0 / 3,
		CertSyncInterval:  time.Minute,
		Backfill:          true,
		BackfillWorkers:   8,
		ResyncPeriod:      10 * time.Minute,
		ShutdownGrace:     10 * time.Second,

		Cleanup:                true,
		ConfigReloadInterval:   10 * time.Second,
		SecretsDir:             "/etc/kube-node-ready/secrets",
		CleanupWorkers:         16,
		CleanupRetryBase:       5 * time.Second,
		CleanupRetryMax:        5 * time.Minute,
		SkipAnnotation:         api.SkipCleanupAnnotation,
		LeaderElect:            true,
		SuspendConfigMap:       api.SuspendConfigMap,
		LeaseName:              "kube-node-ready-webhook",
		LeaseDuration:          15 * time.Second,
		RenewDeadline:          10 * time.Second,
		RetryPeriod:            2 * time.Second,
		Remediation:            "off",
		MaxReplacing:           "1",
		RemediationInterval:    30 * time.Second,
		RemediationStallAfter:  30 * time.Second,
		FleetBudget:            "10%",
		RemediationNodeClaims:  true,
		Autoscaler:             api.DefaultPreset,
		VerifiedLabel:          api.VerifiedLabel,
		AgentSkipAnnotation:    api.SkipVerificationAnnotation,
		AgentRetaintLease:      api.RetaintLease,
		Mode:                   api.ModeEnforce,
		ProtectAnnotation:      api.ProtectAnnotation,
		AgentPlacement:         "{}",
		KarpenterReadinessKeys: true,
		KubeAPIQPS:             300,
		KubeAPIBurst:           600,

		CleanupDeadlineMinAttempts: 3,
		CleanupWait:                time.Minute,

		// The circuit breaker of remediation.
		RemediationBreakerThreshold: "50%",
		RemediationBreakerWindow:    10,
	}
}

// NeedsWatcher reports whether the node watcher (informer, leader election) runs.
func (o *Options) NeedsWatcher() bool {
	return o.Backfill || o.Cleanup || o.Remediation != string(remediate.PolicyOff)
}

// NeedsClient reports whether the options need an API server client.
func (o *Options) NeedsClient() bool { return o.NeedsWatcher() || o.CertMode == CertModeSelfManaged }

// LeaseNS is the namespace of the leader Lease.
func (o *Options) LeaseNS() string {
	if o.LeaseNamespace != "" {
		return o.LeaseNamespace
	}
	return o.Namespace
}

// taintKey is the key of a taint flag's value (key=value:Effect), as
// Validate accepted it.
func taintKey(taint string) string {
	t, err := cli.ParseTaint(taint)
	if err != nil {
		return taint
	}
	return t.Key
}

// SANs splits the serving certificate's names into DNS names (the Service's
// first) and IP addresses.
func (o *Options) SANs() ([]string, []net.IP) {
	svc, ns := o.ServiceName, o.Namespace
	dns := []string{svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local", svc, svc + "." + ns}
	var ips []net.IP
	for _, s := range o.ExtraSANs {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, s)
		}
	}
	return dns, ips
}

// Deadline is the unverified deadline in effect: --unverified-deadline when
// given, else the --autoscaler preset's default.
func (o *Options) Deadline() time.Duration {
	if o.UnverifiedDeadline.IsSet {
		return o.UnverifiedDeadline.D
	}
	return api.DefaultUnverifiedDeadline(o.Autoscaler)
}

// taintKeys resolves the agent's taints from --autoscaler,
// --agent-startup-taint, --agent-unhealthy-taint and
// --previous-taint-keys, as the agents resolve them.
func (o *Options) taintKeys() (cli.TaintKeys, error) {
	return o.taintFlags().Resolve()
}

// taintFlags are the flags that give the agent's taints.
func (o *Options) taintFlags() cli.TaintFlags {
	return cli.TaintFlags{Autoscaler: o.Autoscaler, Startup: o.StartupTaint, Unhealthy: o.UnhealthyTaint, Previous: o.PreviousTaintKeys}
}
