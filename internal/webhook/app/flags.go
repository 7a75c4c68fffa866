package app

import (
	"flag"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
)

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "address of the TLS admission endpoint (/mutate-node)")
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "address of /metrics, /healthz and /readyz (plain HTTP)")
	fs.StringVar(&o.Finalizer, api.FinalizerFlag, o.Finalizer, "finalizer added to every new Node")
	fs.Var((*flagenv.StringList)(&o.LegacyFinalizers), api.LegacyFinalizersFlag, "comma-separated older names of --finalizer this project shipped (only those are accepted: "+api.ShippedFinalizersText()+"): removed with it after cleanup and by remove-finalizers, replaced by it on live nodes")
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
	fs.BoolVar(&o.Cleanup, api.CleanupFlag, o.Cleanup, "run cleanup plugins when a Node with the finalizer is deleted, then remove the finalizer (needs API access; false only for an admission-only replica)")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "cleanup configuration file (YAML, e.g. a mounted ConfigMap); reloaded when it changes; empty = built-in defaults (log plugin only)")
	fs.DurationVar(&o.ConfigReloadInterval, "config-reload-interval", o.ConfigReloadInterval, "how often the configuration file is checked for changes")
	fs.StringVar(&o.SecretsDir, "secrets-dir", o.SecretsDir, "directory the cleanup plugins' secret files (tokenFile, urlFile, authHeaderFile) must be in, such as a mounted Secret; a file outside it, reached through .., or through a symlink leading out, is refused")
	fs.IntVar(&o.CleanupWorkers, "cleanup-workers", o.CleanupWorkers, "nodes cleaned up at once")
	fs.DurationVar(&o.CleanupRetryBase, "cleanup-retry-base", o.CleanupRetryBase, "first delay before retrying a failed node cleanup; doubles per failure")
	fs.DurationVar(&o.CleanupRetryMax, "cleanup-retry-max", o.CleanupRetryMax, "longest delay between retries of a failed node cleanup")
	fs.Var(&o.CleanupDeadline, "cleanup-deadline", "longest time failing critical plugins may hold a deleted node, from its deletion; then the finalizer is removed anyway with a Warning Event (off unless given)")
	fs.IntVar(&o.CleanupDeadlineMinAttempts, "cleanup-deadline-min-attempts", o.CleanupDeadlineMinAttempts, "with --cleanup-deadline, the finalizer is removed only after this many failed attempts, however long the node has been deleted; an attempt counts when it called every critical plugin or left one out because a health probe newer than the node's previous attempt failed")
	fs.DurationVar(&o.PluginHealthInterval, "plugin-health-interval", o.PluginHealthInterval, "how often cleanup plugins that offer a health probe (portworx, notify, hook) are probed; they are also probed before a cleanup starts, and one whose probe fails is not run in that attempt; 0 turns probing off")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "plugins report what they would do and change nothing; finalizers are still removed")
	fs.DurationVar(&o.CleanupWait, "cleanup-wait", o.CleanupWait, "remove-finalizers: longest wait for node cleanups in progress to finish before their finalizer is removed anyway (each node whose cleanup is cut short is named); 0 does not wait")
	fs.StringVar(&o.FinalizerRecord, "finalizer-record", o.FinalizerRecord, "ConfigMap in --namespace recording this release's finalizer names (keys finalizers, written by the chart, and used, written by the webhook): the webhook records --finalizer there before adding it and does not start while nodes carry a custom name it used before and may not remove; remove-finalizers removes only this release's names, the recorded ones included, and nothing when neither the ConfigMap nor the Lease --leader-elect-lease-name exists (no webhook of this release ran here); empty: no record, and remove-finalizers removes --finalizer, --legacy-finalizers and the shipped names unconditionally")
	fs.StringVar(&o.SkipAnnotation, api.SkipCleanupAnnotationFlag, o.SkipAnnotation, "Node annotation that, set to \"true\", removes the finalizer without cleanup (emergency bypass)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect one replica (Lease) to back-fill and clean up")
	fs.StringVar(&o.LeaseName, "leader-elect-lease-name", o.LeaseName, "name of the leader Lease")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-namespace", o.LeaseNamespace, "namespace of the leader Lease; empty = --namespace")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a standby waits after the last renewal before taking over")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew before it stops working")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "interval between election attempts")
	fs.StringVar(&o.PodName, "pod-name", o.PodName, "this replica's name (Lease holder, Events); empty = host name")
	fs.StringVar(&o.Remediation, api.RemediationFlag, o.Remediation, "what happens to a node still carrying the key of --agent-startup-taint or --agent-unhealthy-taint after --unverified-deadline: off, report (Warning Event, metric) or replace (a node that never verified and runs nothing but DaemonSet and mirror pods: delete its Karpenter NodeClaim, else the Node; a node that verified once is only reported unless --remediation-replace-retainted)")
	fs.Var(&o.UnverifiedDeadline, api.UnverifiedDeadlineFlag, "how long a node may stay unverified (startup or unhealthy taint) before --remediation acts, counted from when this replica first saw it unverified (never from the node's own clock), and never from before it began leading or the API server last answered again after an outage; unset: 10m under --autoscaler=cluster-autoscaler (before CA's 15m --max-node-provision-time and --max-node-startup-time), else 30m")
	fs.StringVar(&o.MaxReplacing, "max-replacing", o.MaxReplacing, "most nodes replaced and still present at once: a count (\"1\") or a share of all nodes (\"5%\"), at least 1")
	fs.BoolVar(&o.RemediationDryRun, "remediation-dry-run", o.RemediationDryRun, "with --remediation=replace, record what would be deleted (Event, log, metric) and delete nothing")
	fs.DurationVar(&o.RemediationInterval, "remediation-interval", o.RemediationInterval, "time between remediation scans")
	fs.DurationVar(&o.RemediationStallAfter, "remediation-stall-after", o.RemediationStallAfter, "with --remediation=replace, how long a node marked as replacing may stay without going away (the delete failed, the leader changed, Karpenter has not acted on its NodeClaim) before the replacement is tried again through every gate, counted from when this replica first saw the mark; the wait is at least 2 × --remediation-interval")
	fs.StringVar(&o.FleetBudget, "agent-fleet-budget", o.FleetBudget, "the agents' --fleet-budget: while that many nodes are re-tainted (--agent-verified-label=false), nothing is replaced")
	fs.StringVar(&o.RemediationBreakerThreshold, "remediation-breaker-threshold", o.RemediationBreakerThreshold, "circuit breaker, one per node pool (--remediation-pool-label): stop replacing a pool's nodes while this share (\"50%\") of its latest --remediation-breaker-window new nodes went past --unverified-deadline without verifying (a broken agent image, CNI or subnet); resume when a new node of the pool verifies; \"off\" turns it off")
	fs.IntVar(&o.RemediationBreakerWindow, "remediation-breaker-window", o.RemediationBreakerWindow, "how many of the latest new nodes (verified, or past the deadline) the circuit breaker counts")
	fs.StringVar(&o.RemediationPoolLabel, "remediation-pool-label", o.RemediationPoolLabel, "node label whose value names a node's pool: each pool has a circuit breaker of its own, and nodes without the label share one; empty: the first of "+strings.Join(remediate.PoolLabels, ", ")+" a node carries")
	fs.BoolVar(&o.RemediationReplaceRetainted, "remediation-replace-retainted", o.RemediationReplaceRetainted, "with --remediation=replace, also replace a node that verified once and was re-tainted past --unverified-deadline, only by deleting its Karpenter NodeClaim (Karpenter cordons it and drains it through the Eviction API, honouring PodDisruptionBudgets); without a NodeClaim it is only reported. Off: such a node is only reported, never deleted")
	fs.BoolVar(&o.RemediationNodeClaims, "remediation-nodeclaims", o.RemediationNodeClaims, "replace a node by deleting the Karpenter NodeClaim (karpenter.sh/v1) whose status names it, when the API exists; else, or when absent or forbidden, delete the Node (only a node that never verified and runs nothing but DaemonSet and mirror pods)")
	fs.StringVar(&o.Autoscaler, api.AutoscalerFlag, o.Autoscaler, "the agents' --autoscaler, the preset of taint keys the cluster's autoscaler understands: "+strings.Join(api.PresetNames(), ", ")+"; gives --agent-startup-taint, --agent-unhealthy-taint and the default of --unverified-deadline")
	fs.StringVar(&o.StartupTaint, api.AgentStartupTaintFlag, o.StartupTaint, "the agent's --startup-taint (key=value:Effect); a node carrying its key, not verified, is unverified; empty takes the --autoscaler preset's")
	fs.StringVar(&o.UnhealthyTaint, api.AgentUnhealthyTaintFlag, o.UnhealthyTaint, "the agent's --unhealthy-taint (key=value:Effect); a node carrying its key, not verified, is unverified; empty takes the --autoscaler preset's")
	fs.Var((*flagenv.StringList)(&o.PreviousTaintKeys), api.PreviousTaintKeysFlag, "the agents' --previous-taint-keys: a node carrying one of them, or any preset's startup or unhealthy key, not verified, is unverified")
	fs.StringVar(&o.VerifiedLabel, "agent-verified-label", o.VerifiedLabel, "the agent's --verified-label: \"true\" once verified, \"false\" while re-tainted; remediation watches the nodes where it is not \"true\"")
	fs.StringVar(&o.AgentRetaintLease, "agent-retaint-lease", o.AgentRetaintLease, "the agents' re-taint Lease in --namespace: while an agent was refused a re-taint by --agent-fleet-budget within --unverified-deadline (the Lease's "+api.FleetBudgetRefusedAnnotation+" annotation changed), nothing is replaced; empty: not read")
	fs.StringVar(&o.SuspendConfigMap, api.SuspendConfigMapFlag, o.SuspendConfigMap, "the operator's suspend switch, a ConfigMap in --namespace that kubectl node-ready suspend writes and resume deletes (the agents' --suspend-configmap): while it exists, or cannot be read, remediation replaces nothing and admission adds no startup taint; cleanup goes on; empty: no switch")
	fs.StringVar(&o.AgentSkipAnnotation, "agent-skip-verification-annotation", o.AgentSkipAnnotation, "the agent's --skip-verification-annotation: a node carrying it set to \"true\" is never replaced and does not count against --agent-fleet-budget")
	fs.StringVar(&o.ProtectAnnotation, "protect-annotation", o.ProtectAnnotation, "node annotation that, set to \"true\", keeps remediation from replacing the node (the chart's deletion protection uses the same)")
	fs.Var((*flagenv.StringList)(&o.ExternalNames), api.ExternalNamesFlag, "the agents' --"+api.ExternalNamesFlag+": comma-separated names outside the cluster, resolved from this pod every minute through its resolver as the agents' dns check does; each outcome is an Event on the Pod (Warning "+api.EventExternalNameUnresolved+" at every round a name does not resolve, Normal "+api.EventExternalNameResolved+" at the first round and when it resolves again), which `kubectl node-ready doctor` reads; empty: none")
	fs.StringVar(&o.PeerService, api.PeerServiceFlag, o.PeerService, "the agents' --"+api.PeerServiceFlag+", their headless Service in --namespace: admission annotates every new Node ("+api.PeerSlicesAnnotation+") with the first of its EndpointSlices that node's agent would follow, followed by a metadata-only watch of their names, so the agent's join lists none; never waited for: a node created before the names are known gets no annotation, and its agent lists them; empty: no annotation")
	o.addStartupTaintFlags(fs)
	o.addModeFlag(fs)
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "client-side request rate limit to the API server")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "client-side request burst to the API server")
}

// Parse registers the flags (and the old names of renamed ones), applies their environment twins
// (KNR_WEBHOOK_<FLAG>, dashes as underscores; POD_NAMESPACE and POD_NAME
// from the downward API for --namespace and --pod-name, below their twins),
// then parses args, so the command line wins.
func (o *Options) Parse(fs *flag.FlagSet, args []string) error {
	o.AddFlags(fs)
	o.renames = flagenv.AddRenamed(fs, renamedFlags)
	if err := flagenv.Apply(fs, EnvPrefix, map[string][]string{"namespace": {"POD_NAMESPACE"}, "pod-name": {"POD_NAME"}}); err != nil {
		return err
	}
	return fs.Parse(args)
}

// renamedFlags are the flags renamed since the last release: a released
// name keeps working, with a warning, until the next minor release. None
// since 0.1.0.
var renamedFlags []flagenv.Renamed

// Deprecations says, once per old flag name the command line or the
// environment used, which flag replaces it: logged at start-up.
func (o *Options) Deprecations() []string {
	return o.renames.Warnings()
}
