// Package webhookopts is the configuration of the webhook binary: one Options
// struct, its flags (each with a KNR_* environment twin) and validation.
package webhookopts

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// Certificate modes.
const (
	// CertModeSelfManaged keeps a CA and serving certificate in a Secret and
	// writes the CA bundle into the MutatingWebhookConfiguration.
	CertModeSelfManaged = "self-managed"
	// CertModeFiles serves certificate files written by someone else (cert-manager).
	CertModeFiles = "files"
)

// EnvPrefix prefixes every flag's environment twin.
const EnvPrefix = "KNR"

// Options configures kube-node-ready-webhook.
type Options struct {
	// ListenAddress is where the TLS admission endpoint listens.
	ListenAddress string
	// MetricsAddress serves /metrics, /healthz and /readyz over plain HTTP.
	MetricsAddress string
	// Finalizer is added to every new Node.
	Finalizer string
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
	// CertSecretName is the Secret that holds the self-managed CA and certificate.
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
	// BackfillWorkers is the number of back-fill workers.
	BackfillWorkers int
	// ResyncPeriod is how often the informer re-examines every cached Node.
	ResyncPeriod time.Duration
	// ShutdownGrace bounds how long in-flight requests may finish on SIGTERM.
	ShutdownGrace time.Duration
}

// Default returns the documented defaults.
func Default() Options {
	return Options{
		ListenAddress:     ":8443",
		MetricsAddress:    ":8080",
		Finalizer:         "infra.894.io/node-cleanup",
		MaxBodyBytes:      3 << 20,
		LogLevel:          "info",
		CertMode:          CertModeSelfManaged,
		TLSCertFile:       "/etc/kube-node-ready/tls/tls.crt",
		TLSKeyFile:        "/etc/kube-node-ready/tls/tls.key",
		TLSReloadInterval: 10 * time.Second,
		Namespace:         "kube-system",
		ServiceName:       "kube-node-ready-webhook",
		CertSecretName:    "kube-node-ready-webhook-tls",
		WebhookConfigName: "kube-node-ready-webhook",
		CAValidity:        5 * 365 * 24 * time.Hour,
		CertValidity:      365 * 24 * time.Hour,
		CertRenewBefore:   1.0 / 3,
		CertSyncInterval:  time.Minute,
		Backfill:          true,
		BackfillWorkers:   4,
		ResyncPeriod:      10 * time.Minute,
		ShutdownGrace:     10 * time.Second,
	}
}

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "address of the TLS admission endpoint (/mutate-node)")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "address of /metrics, /healthz and /readyz (plain HTTP)")
	fs.StringVar(&o.Finalizer, "finalizer", o.Finalizer, "finalizer added to every new Node")
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
	fs.StringVar(&o.CertSecretName, "cert-secret", o.CertSecretName, "Secret holding the self-managed CA and serving certificate")
	fs.Var((*listValue)(&o.ExtraSANs), "extra-sans", "comma-separated extra DNS names or IPs for the self-managed certificate")
	fs.StringVar(&o.WebhookConfigName, "webhook-config-name", o.WebhookConfigName, "MutatingWebhookConfiguration whose caBundle the webhook writes (self-managed); empty to leave it alone")
	fs.DurationVar(&o.CAValidity, "ca-validity", o.CAValidity, "lifetime of a new self-managed CA")
	fs.DurationVar(&o.CertValidity, "cert-validity", o.CertValidity, "lifetime of a new self-managed serving certificate")
	fs.Float64Var(&o.CertRenewBefore, "cert-renew-before", o.CertRenewBefore, "renew a certificate when this fraction of its lifetime is left")
	fs.DurationVar(&o.CertSyncInterval, "cert-sync-interval", o.CertSyncInterval, "how often the Secret and caBundle are checked (self-managed)")
	fs.BoolVar(&o.Backfill, "backfill", o.Backfill, "add the finalizer to existing Nodes that lack it (metadata-only informer)")
	fs.IntVar(&o.BackfillWorkers, "backfill-workers", o.BackfillWorkers, "number of back-fill workers")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod, "how often every cached Node is re-examined")
	fs.DurationVar(&o.ShutdownGrace, "shutdown-grace", o.ShutdownGrace, "time in-flight requests get to finish on SIGTERM")
}

// ApplyEnv sets each flag from its environment twin (KNR_<FLAG>, dashes as
// underscores) and documents the twin in the flag's usage. Call it after
// AddFlags and before Parse, so the command line wins. POD_NAMESPACE (from the
// downward API) is read for --namespace before KNR_NAMESPACE.
func ApplyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		names := []string{EnvName(f.Name)}
		if f.Name == "namespace" {
			names = []string{"POD_NAMESPACE", EnvName(f.Name)}
		}
		if f.Name == "version" {
			return
		}
		f.Usage += " (env " + strings.Join(names, ", ") + ")"
		for _, env := range names {
			if v, ok := lookup(env); ok {
				if err := fs.Set(f.Name, v); err != nil {
					errs = append(errs, fmt.Errorf("%s=%q (flag --%s): %w", env, v, f.Name, err))
				}
			}
		}
	})
	return errors.Join(errs...)
}

// EnvName is the environment twin of a flag.
func EnvName(flagName string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Validate reports every inconsistent option.
func (o *Options) Validate() error {
	var errs []error
	if o.Finalizer == "" || !strings.Contains(o.Finalizer, "/") {
		errs = append(errs, fmt.Errorf("--finalizer %q must be a qualified name like example.com/name", o.Finalizer))
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
		errs = append(errs, errors.New("--listen-address and --metrics-address must be set"))
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
	return errors.Join(errs...)
}

// NeedsClient reports whether the options need an API server client.
func (o *Options) NeedsClient() bool { return o.Backfill || o.CertMode == CertModeSelfManaged }

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

// listValue is a comma-separated list flag; an empty string is an empty list.
type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ",") }

func (l *listValue) Set(s string) error {
	*l = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}
