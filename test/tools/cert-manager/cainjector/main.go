// Command cainjector is cert-manager's CA injector for the project's tests:
// cert-manager's own injectors (github.com/cert-manager/cert-manager
// pkg/controller/cainjector, at the version pinned in ../go.mod) in a
// controller-runtime manager set up the way cert-manager's cmd/cainjector
// sets it up — Secrets read uncached, a Lease for leader election, metrics on
// :9402 — so an object annotated cert-manager.io/inject-ca-from gets the
// ca.crt of that Certificate's Secret as its caBundle. See ../tools.go for
// why this wiring is the project's own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
)

// options are cert-manager's cainjector flags this build understands, with
// cert-manager's defaults.
type options struct {
	namespace               string
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	metricsAddress          string
	certificatesSource      bool
	injectables             map[string]*bool
}

func main() {
	o := options{injectables: map[string]*bool{}}
	fs := flag.CommandLine
	// --kubeconfig is controller-runtime's own flag (its config package registers it).
	fs.StringVar(&o.namespace, "namespace", "", "watch only this namespace (empty: all)")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "inject only while holding the Lease cert-manager-cainjector-leader-election")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "kube-system", "namespace of the leader election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 60*time.Second, "leader election lease duration")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 40*time.Second, "leader election renew deadline")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 15*time.Second, "leader election retry period")
	fs.StringVar(&o.metricsAddress, "metrics-listen-address", "0.0.0.0:9402", "Prometheus metrics address (0 disables)")
	fs.BoolVar(&o.certificatesSource, "enable-certificates-data-source", true, "inject from cert-manager.io/inject-ca-from (Certificates); needs the Certificate CRD")
	for _, kind := range []struct{ name, flag string }{
		{cainjector.MutatingWebhookConfigurationName, "mutatingwebhookconfigurations"},
		{cainjector.ValidatingWebhookConfigurationName, "validatingwebhookconfigurations"},
		{cainjector.APIServiceName, "apiservices"},
		{cainjector.CustomResourceDefinitionName, "customresourcedefinitions"},
	} {
		o.injectables[kind.name] = fs.Bool("enable-"+kind.flag+"-injectable", true, "inject into "+kind.flag)
	}
	klog.InitFlags(fs)
	version := fs.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Printf("cert-manager cainjector %s (kube-node-ready test build)\n", util.AppVersion)
		return
	}
	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "cainjector")
	if err := run(ctx, o); err != nil {
		logf.Log.Error(err, "cainjector exited")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	log := logf.FromContext(ctx)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))

	var namespaces map[string]cache.Config
	if o.namespace != "" {
		namespaces = map[string]cache.Config{o.namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// Like cert-manager: Secrets are read from the API server when an
		// injectable is reconciled, never cached, so the injector does not
		// hold every Secret of the cluster in memory.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                o.leaderElect,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddress},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}

	if o.certificatesSource {
		// cert-manager's cainjector waits up to 5 minutes for the Certificate
		// CRD; discovery tells the same without reading CRDs (no RBAC for it).
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return err
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(context.Context) (bool, error) {
			res, err := dc.ServerResourcesForGroupVersion("cert-manager.io/v1")
			if err == nil && slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == "certificates" }) {
				return true, nil
			}
			log.Info("waiting for the certificates.cert-manager.io API", "error", err)
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("certificates.cert-manager.io not served: %w", err)
		}
	}

	enabled := map[string]bool{}
	for name, on := range o.injectables {
		enabled[name] = *on
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    o.namespace,
		EnableCertificatesDataSource: o.certificatesSource,
		EnabledReconcilersFor:        enabled,
	}); err != nil {
		return fmt.Errorf("register injectors: %w", err)
	}
	log.Info("starting", "version", util.AppVersion, "injectables", enabled)
	return mgr.Start(ctx)
}
