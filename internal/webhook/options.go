package webhook

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
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
const EnvPrefix = "KNR_WEBHOOK"

// Options configures kube-node-ready-webhook.
type Options struct {
	// ListenAddress is where the TLS admission endpoint listens.
	ListenAddress string
	// MetricsAddress serves /metrics, /healthz and /readyz over plain HTTP.
	MetricsAddress string
	// Finalizer is added to every new Node.
	Finalizer string
	// LegacyFinalizers are older names of Finalizer that this project wrote:
	// cleanup and remove-finalizers remove them too, and back-fill replaces
	// them, so renaming the finalizer never strands a node.
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
	// LegacyCertSecretName is the Secret an earlier version created for
	// itself: its CA is carried over into CertSecretName, then it is deleted.
	LegacyCertSecretName string
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
	// BackfillWorkers is the number of back-fill workers.
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
	// CleanupDeadlineMinAttempts is how many failed attempts that called
	// every critical plugin (a plugin left out because its health probe
	// failed was not called) the deadline also waits for: time alone, such
	// as a webhook outage longer than the deadline, never releases a node.
	CleanupDeadlineMinAttempts int
	// PluginHealthInterval is how often plugins with a health probe are
	// probed (they are also probed before a cleanup starts); 0 turns probing off.
	PluginHealthInterval time.Duration
	// DryRun makes every plugin report instead of act (finalizers are still removed).
	DryRun bool
	// SkipAnnotation set to "true" on a Node removes the finalizer without cleanup.
	SkipAnnotation string
	// CleanupWait bounds how long remove-finalizers waits for cleanups in
	// progress to finish before it strips their finalizer anyway; 0 waits not.
	CleanupWait time.Duration

	// LeaderElect makes replicas elect one leader that back-fills and cleans up.
	LeaderElect bool
	// LeaseName and LeaseNamespace locate the leader Lease (namespace empty = Namespace).
	LeaseName, LeaseNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod are the election timings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// PodName identifies this replica (Lease holder, Events about the
	// configuration); empty means the host name.
	PodName string
	// Remediation is the policy for nodes unverified past UnverifiedDeadline:
	// off, report or replace (see package remediate).
	Remediation string
	// UnverifiedDeadline is how long a node may carry the startup or unhealthy taint.
	UnverifiedDeadline time.Duration
	// MaxReplacing bounds nodes replaced and still present ("1", "10%").
	MaxReplacing string
	// RemediationDryRun reports what would be deleted.
	RemediationDryRun bool
	// RemediationInterval is the time between scans.
	RemediationInterval time.Duration
	// FleetBudget is the agents' --max-retainted; while it is used up nothing is replaced.
	FleetBudget string
	// RemediationNodeClaims deletes a node's Karpenter NodeClaim instead of the Node.
	RemediationNodeClaims bool
	// RemediationBreakerThreshold is the share ("50%") of the latest
	// RemediationBreakerWindow new nodes that, never verified, stops
	// replacements until a new node verifies; "off" turns the breaker off.
	RemediationBreakerThreshold string
	// RemediationBreakerWindow is how many of the latest new nodes count.
	RemediationBreakerWindow int
	// StartupTaint, UnhealthyTaint and VerifiedLabel are the agent's names.
	StartupTaint, UnhealthyTaint, VerifiedLabel string
	// AgentSkipAnnotation is the agent's bypass annotation (its
	// --skip-annotation): a bypassed node does not count against the fleet
	// budget.
	AgentSkipAnnotation string
	// ProtectAnnotation set to "true" keeps a node from being replaced.
	ProtectAnnotation string

	// KubeAPIQPS and KubeAPIBurst are the client-side rate limits of the
	// API client (Events use a separate client with the same limits).
	KubeAPIQPS   float64
	KubeAPIBurst int
}

// NewOptions returns the documented defaults.
func NewOptions() *Options {
	return &Options{
		ListenAddress:     ":8443",
		MetricsAddress:    ":8080",
		Finalizer:         api.Finalizer,
		MaxBodyBytes:      3 << 20,
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
		BackfillWorkers:   4,
		ResyncPeriod:      10 * time.Minute,
		ShutdownGrace:     10 * time.Second,

		Cleanup:               true,
		ConfigReloadInterval:  10 * time.Second,
		SecretsDir:            "/etc/kube-node-ready/secrets",
		CleanupWorkers:        16,
		CleanupRetryBase:      5 * time.Second,
		CleanupRetryMax:       5 * time.Minute,
		SkipAnnotation:        api.SkipCleanupAnnotation,
		LeaderElect:           true,
		LeaseName:             "kube-node-ready-webhook",
		LeaseDuration:         15 * time.Second,
		RenewDeadline:         10 * time.Second,
		RetryPeriod:           2 * time.Second,
		Remediation:           "off",
		UnverifiedDeadline:    30 * time.Minute,
		MaxReplacing:          "1",
		RemediationInterval:   30 * time.Second,
		FleetBudget:           "10%",
		RemediationNodeClaims: true,
		StartupTaint:          api.StartupTaintKey,
		UnhealthyTaint:        api.UnhealthyTaintKey,
		VerifiedLabel:         api.VerifiedLabel,
		AgentSkipAnnotation:   api.SkipVerificationAnnotation,
		ProtectAnnotation:     api.ProtectAnnotation,
		KubeAPIQPS:            50,
		KubeAPIBurst:          100,

		CleanupDeadlineMinAttempts: 3,
		CleanupWait:                time.Minute,

		// The circuit breaker of remediation.
		RemediationBreakerThreshold: "50%",
		RemediationBreakerWindow:    10,
	}
}

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "address of the TLS admission endpoint (/mutate-node)")
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "address of /metrics, /healthz and /readyz (plain HTTP)")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "deprecated: use --metrics-bind-address")
	fs.StringVar(&o.Finalizer, "finalizer", o.Finalizer, "finalizer added to every new Node")
	fs.Var((*flagenv.StringList)(&o.LegacyFinalizers), "legacy-finalizers", "comma-separated older names of --finalizer this project wrote: removed with it after cleanup and by remove-finalizers, replaced by it on live nodes")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "largest admission request body accepted; larger ones get HTTP 413")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	fs.StringVar(&o.CertMode, "cert-mode", o.CertMode, "self-managed (CA and certificate in a Secret, caBundle written by the webhook) or files (e.g. from cert-manager)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "serving certificate (files mode); reloaded when it changes")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", o.TLSKeyFile, "serving key (files mode); reloaded when it changes")
	fs.StringVar(&o.ClientCAFile, "client-ca", o.ClientCAFile, "CA bundle for client certificates; when set, clients (the API server) must present one")
	fs.DurationVar(&o.TLSReloadInterval, "tls-reload-interval", o.TLSReloadInterval, "how often certificate files are checked for changes")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the Service and the certificate Secret")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName, "the webhook's Service; its DNS names go into the self-managed certificate")
	fs.StringVar(&o.CertSecretName, "cert-secret", o.CertSecretName, "Secret holding the self-managed CA and serving certificate; the chart creates it empty and the webhook fills it")
	fs.StringVar(&o.LegacyCertSecretName, "legacy-cert-secret", o.LegacyCertSecretName, "Secret an earlier version created for its self-managed certificates: its CA is carried over into --cert-secret, then it is deleted if the webhook created it; empty for none")
	fs.Var((*flagenv.StringList)(&o.ExtraSANs), "extra-sans", "comma-separated extra DNS names or IPs for the self-managed certificate")
	fs.StringVar(&o.WebhookConfigName, "webhook-config-name", o.WebhookConfigName, "MutatingWebhookConfiguration whose caBundle the webhook writes (self-managed); empty to leave it alone")
	fs.DurationVar(&o.CAValidity, "ca-validity", o.CAValidity, "lifetime of a new self-managed CA")
	fs.DurationVar(&o.CertValidity, "cert-validity", o.CertValidity, "lifetime of a new self-managed serving certificate")
	fs.Float64Var(&o.CertRenewBefore, "cert-renew-before", o.CertRenewBefore, "renew a certificate when this fraction of its lifetime is left")
	fs.DurationVar(&o.CertSyncInterval, "cert-sync-interval", o.CertSyncInterval, "how often the Secret and caBundle are checked (self-managed)")
	fs.BoolVar(&o.Backfill, "backfill", o.Backfill, "add the finalizer to existing Nodes that lack it (metadata-only informer)")
	fs.IntVar(&o.BackfillWorkers, "backfill-workers", o.BackfillWorkers, "number of back-fill workers")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod, "how often every cached Node is re-examined")
	fs.DurationVar(&o.ShutdownGrace, "shutdown-grace", o.ShutdownGrace, "time in-flight requests get to finish on SIGTERM")
	fs.BoolVar(&o.Cleanup, "cleanup", o.Cleanup, "run cleanup plugins when a Node with the finalizer is deleted, then remove the finalizer (needs API access; false only for an admission-only replica)")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "cleanup configuration file (YAML, e.g. a mounted ConfigMap); reloaded when it changes; empty = built-in defaults (log plugin only)")
	fs.DurationVar(&o.ConfigReloadInterval, "config-reload-interval", o.ConfigReloadInterval, "how often the configuration file is checked for changes")
	fs.StringVar(&o.SecretsDir, "secrets-dir", o.SecretsDir, "directory the cleanup plugins' secret files (tokenFile, urlFile, authHeaderFile) must be in, such as a mounted Secret; a file outside it, reached through .., or through a symlink leading out, is refused")
	fs.IntVar(&o.CleanupWorkers, "cleanup-workers", o.CleanupWorkers, "nodes cleaned up at once")
	fs.DurationVar(&o.CleanupRetryBase, "cleanup-retry-base", o.CleanupRetryBase, "first delay before retrying a failed node cleanup; doubles per failure")
	fs.DurationVar(&o.CleanupRetryMax, "cleanup-retry-max", o.CleanupRetryMax, "longest delay between retries of a failed node cleanup")
	fs.Var(&o.CleanupDeadline, "cleanup-deadline", "longest time failing critical plugins may hold a deleted node, from its deletion; then the finalizer is removed anyway with a Warning Event (off unless given)")
	fs.IntVar(&o.CleanupDeadlineMinAttempts, "cleanup-deadline-min-attempts", o.CleanupDeadlineMinAttempts, "with --cleanup-deadline, the finalizer is removed only after this many failed attempts that called every critical plugin (one skipped because its health probe failed is not called), however long the node has been deleted")
	fs.DurationVar(&o.PluginHealthInterval, "plugin-health-interval", o.PluginHealthInterval, "how often cleanup plugins that offer a health probe (portworx, notify, hook) are probed; they are also probed before a cleanup starts, and one whose probe fails is not run in that attempt; 0 turns probing off")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "plugins report what they would do and change nothing; finalizers are still removed")
	fs.DurationVar(&o.CleanupWait, "cleanup-wait", o.CleanupWait, "remove-finalizers: longest wait for node cleanups in progress to finish before their finalizer is removed anyway (each node whose cleanup is cut short is named); 0 does not wait")
	fs.StringVar(&o.SkipAnnotation, "skip-annotation", o.SkipAnnotation, "Node annotation that, set to \"true\", removes the finalizer without cleanup (emergency bypass)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect one replica (Lease) to back-fill and clean up")
	fs.StringVar(&o.LeaseName, "leader-elect-lease-name", o.LeaseName, "name of the leader Lease")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-namespace", o.LeaseNamespace, "namespace of the leader Lease; empty = --namespace")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a standby waits after the last renewal before taking over")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew before it stops working")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "interval between election attempts")
	fs.StringVar(&o.PodName, "pod-name", o.PodName, "this replica's name (Lease holder, Events); empty = host name")
	fs.StringVar(&o.Remediation, "remediation", o.Remediation, "what happens to a node still carrying --startup-taint or --unhealthy-taint after --unverified-deadline: off, report (Warning Event, metric) or replace (delete its Karpenter NodeClaim, else the Node)")
	fs.DurationVar(&o.UnverifiedDeadline, "unverified-deadline", o.UnverifiedDeadline, "how long a node may stay unverified (startup or unhealthy taint) before --remediation acts, counted from when this replica first saw it unverified (never from the node's own clock), and never from before it began leading or the API server last answered again after an outage")
	fs.StringVar(&o.MaxReplacing, "max-replacing", o.MaxReplacing, "most nodes replaced and still present at once: a count (\"1\") or a share of all nodes (\"5%\"), at least 1")
	fs.BoolVar(&o.RemediationDryRun, "remediation-dry-run", o.RemediationDryRun, "with --remediation=replace, record what would be deleted (Event, log, metric) and delete nothing")
	fs.DurationVar(&o.RemediationInterval, "remediation-interval", o.RemediationInterval, "time between remediation scans")
	fs.StringVar(&o.FleetBudget, "fleet-budget", o.FleetBudget, "the agents' --max-retainted: while that many nodes are re-tainted (--verified-label=false), nothing is replaced")
	fs.StringVar(&o.RemediationBreakerThreshold, "remediation-breaker-threshold", o.RemediationBreakerThreshold, "circuit breaker: stop replacing while this share (\"50%\") of the latest --remediation-breaker-window new nodes went past --unverified-deadline without verifying (a broken agent image, CNI or subnet); resume when a new node verifies; \"off\" turns it off")
	fs.IntVar(&o.RemediationBreakerWindow, "remediation-breaker-window", o.RemediationBreakerWindow, "how many of the latest new nodes (verified, or past the deadline) the circuit breaker counts")
	fs.BoolVar(&o.RemediationNodeClaims, "remediation-nodeclaims", o.RemediationNodeClaims, "replace a node by deleting the Karpenter NodeClaim (karpenter.sh/v1) that owns it, when the API exists; else, or when absent or forbidden, delete the Node")
	fs.StringVar(&o.StartupTaint, "startup-taint", o.StartupTaint, "key of the agent's startup taint")
	fs.StringVar(&o.UnhealthyTaint, "unhealthy-taint", o.UnhealthyTaint, "key of the agent's re-taint (--retaint-taint)")
	fs.StringVar(&o.VerifiedLabel, "verified-label", o.VerifiedLabel, "the agent's verified label")
	fs.StringVar(&o.AgentSkipAnnotation, "agent-skip-annotation", o.AgentSkipAnnotation, "the agent's bypass annotation (its --skip-annotation): a node carrying it set to \"true\" does not count against --fleet-budget")
	fs.StringVar(&o.ProtectAnnotation, "protect-annotation", o.ProtectAnnotation, "node annotation that, set to \"true\", keeps remediation from replacing the node (the chart's deletion protection uses the same)")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "client-side request rate limit to the API server")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "client-side request burst to the API server")
}

// Parse registers the flags, applies their environment twins
// (KNR_WEBHOOK_<FLAG>, dashes as underscores; POD_NAMESPACE and POD_NAME
// from the downward API for --namespace and --pod-name, below their twins),
// then parses args, so the command line wins.
func (o *Options) Parse(fs *flag.FlagSet, args []string) error {
	o.AddFlags(fs)
	if err := flagenv.Apply(fs, EnvPrefix, map[string][]string{"namespace": {"POD_NAMESPACE"}, "pod-name": {"POD_NAME"}}); err != nil {
		return err
	}
	return fs.Parse(args)
}

// Validate reports every inconsistent option.
func (o *Options) Validate() error {
	var errs []error
	if o.Finalizer == "" || !strings.Contains(o.Finalizer, "/") {
		errs = append(errs, fmt.Errorf("--finalizer %q must be a qualified name like example.com/name", o.Finalizer))
	}
	for _, f := range o.LegacyFinalizers {
		if !strings.Contains(f, "/") || f == o.Finalizer {
			errs = append(errs, fmt.Errorf("--legacy-finalizers %q must be a qualified name other than --finalizer", f))
		}
	}
	if o.CleanupWait < 0 {
		errs = append(errs, fmt.Errorf("--cleanup-wait %s must not be negative", o.CleanupWait))
	}
	if o.Backfill && !o.Cleanup {
		// Admission-only replicas are fine (their cleanup runs elsewhere);
		// a back-filling one that never cleans up strands every node.
		errs = append(errs, errors.New("--backfill adds --finalizer to every node but --cleanup=false runs nothing that removes it: pass --backfill=false too, or keep --cleanup"))
	}
	if o.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("--max-body-bytes %d is below 1024", o.MaxBodyBytes))
	}
	switch strings.ToLower(o.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level %q is not debug, info, warn or error", o.LogLevel))
	}
	if o.ListenAddress == "" || o.MetricsAddress == "" {
		errs = append(errs, errors.New("--listen-address and --metrics-bind-address must be set"))
	}
	switch o.CertMode {
	case CertModeFiles:
		if o.TLSCertFile == "" || o.TLSKeyFile == "" {
			errs = append(errs, errors.New("--cert-mode=files needs --tls-cert-file and --tls-key-file"))
		}
		if o.TLSReloadInterval <= 0 {
			errs = append(errs, errors.New("--tls-reload-interval must be positive"))
		}
	case CertModeSelfManaged:
		if o.Namespace == "" || o.ServiceName == "" || o.CertSecretName == "" {
			errs = append(errs, errors.New("--cert-mode=self-managed needs --namespace, --service-name and --cert-secret"))
		}
		if o.CertValidity <= 0 || o.CAValidity <= 0 || o.CertValidity > o.CAValidity {
			errs = append(errs, fmt.Errorf("--cert-validity (%s) and --ca-validity (%s) must be positive, the certificate no longer than the CA", o.CertValidity, o.CAValidity))
		}
		if o.CertRenewBefore <= 0 || o.CertRenewBefore >= 1 {
			errs = append(errs, fmt.Errorf("--cert-renew-before %v must be between 0 and 1", o.CertRenewBefore))
		}
		if o.CertSyncInterval <= 0 {
			errs = append(errs, errors.New("--cert-sync-interval must be positive"))
		}
		if o.ClientCAFile != "" {
			errs = append(errs, errors.New("--client-ca needs --cert-mode=files"))
		}
	default:
		errs = append(errs, fmt.Errorf("--cert-mode %q is not %s or %s", o.CertMode, CertModeSelfManaged, CertModeFiles))
	}
	if o.Backfill && (o.BackfillWorkers < 1 || o.ResyncPeriod < 0) {
		errs = append(errs, errors.New("--backfill-workers must be at least 1 and --resync-period not negative"))
	}
	if o.Cleanup {
		if o.CleanupWorkers < 1 {
			errs = append(errs, fmt.Errorf("--cleanup-workers %d must be at least 1", o.CleanupWorkers))
		}
		if o.CleanupDeadline.IsSet && o.CleanupDeadline.D <= 0 {
			errs = append(errs, fmt.Errorf("--cleanup-deadline %s must be positive (leave it out to turn the deadline off)", o.CleanupDeadline.D))
		}
		if o.CleanupDeadlineMinAttempts < 1 {
			errs = append(errs, fmt.Errorf("--cleanup-deadline-min-attempts %d must be at least 1", o.CleanupDeadlineMinAttempts))
		}
		if o.CleanupRetryBase <= 0 || o.CleanupRetryMax < o.CleanupRetryBase {
			errs = append(errs, fmt.Errorf("--cleanup-retry-base (%s) must be positive and --cleanup-retry-max (%s) not below it", o.CleanupRetryBase, o.CleanupRetryMax))
		}
		if o.PluginHealthInterval < 0 {
			errs = append(errs, fmt.Errorf("--plugin-health-interval %s must not be negative (0 turns probing off)", o.PluginHealthInterval))
		}
		if o.ConfigFile != "" && o.ConfigReloadInterval <= 0 {
			errs = append(errs, errors.New("--config-reload-interval must be positive"))
		}
		if o.SkipAnnotation == "" {
			errs = append(errs, errors.New("--skip-annotation must be set"))
		}
	}
	if p, err := remediate.ParsePolicy(o.Remediation); err != nil {
		errs = append(errs, fmt.Errorf("--remediation %w", err))
	} else if p != remediate.PolicyOff {
		if o.UnverifiedDeadline <= 0 {
			errs = append(errs, fmt.Errorf("--unverified-deadline %s must be positive", o.UnverifiedDeadline))
		}
		if o.RemediationInterval <= 0 {
			errs = append(errs, fmt.Errorf("--remediation-interval %s must be positive", o.RemediationInterval))
		}
		if _, err := budget.Parse(o.MaxReplacing); err != nil {
			errs = append(errs, fmt.Errorf("--max-replacing %w", err))
		}
		if _, err := budget.Parse(o.FleetBudget); err != nil {
			errs = append(errs, fmt.Errorf("--fleet-budget %w", err))
		}
		if _, err := remediate.ParseBreakerThreshold(o.RemediationBreakerThreshold); err != nil {
			errs = append(errs, fmt.Errorf("--remediation-breaker-threshold %w", err))
		}
		if o.RemediationBreakerWindow < 1 {
			errs = append(errs, fmt.Errorf("--remediation-breaker-window %d must be at least 1", o.RemediationBreakerWindow))
		}
		for flag, v := range map[string]string{"startup-taint": o.StartupTaint, "unhealthy-taint": o.UnhealthyTaint, "verified-label": o.VerifiedLabel, "agent-skip-annotation": o.AgentSkipAnnotation} {
			if msgs := validation.IsQualifiedName(v); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("--%s %q: %s", flag, v, strings.Join(msgs, "; ")))
			}
		}
	}
	if o.NeedsWatcher() && o.LeaderElect {
		if o.LeaseName == "" || o.LeaseNamespace == "" && o.Namespace == "" {
			errs = append(errs, errors.New("--leader-elect needs --leader-elect-lease-name and a namespace (--leader-elect-namespace or --namespace)"))
		}
		if o.RetryPeriod <= 0 || o.RenewDeadline <= o.RetryPeriod || o.LeaseDuration <= o.RenewDeadline {
			errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > --leader-elect-retry-period (%s) > 0 must hold", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
		}
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps (%v) must be positive and --kube-api-burst (%d) at least 1", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	return errors.Join(errs...)
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
