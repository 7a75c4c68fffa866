// Command controller is cert-manager's controller for the project's tests:
// cert-manager's own controllers (github.com/cert-manager/cert-manager
// pkg/controller, at the version pinned in ../go.mod) started the way
// cert-manager's cmd/controller starts them — one controller context, a
// Lease for leader election, metrics on :9402, /livez on :9403 — with the
// issuers a cluster without internet access can use: SelfSigned and CA.
// ACME, Vault and Venafi, the ingress and Gateway shims and the
// CertificateSigningRequest controllers are not compiled in (see ../tools.go
// for why this wiring is the project's own).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/metrics"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// options are cert-manager's controller flags this build understands, with
// cert-manager's defaults.
type options struct {
	kubeconfig               string
	apiServerHost            string
	qps                      float64
	burst                    int
	namespace                string
	clusterResourceNamespace string
	controllers              string
	workers                  int
	leaderElect              bool
	leaderElectionNamespace  string
	leaseDuration            time.Duration
	renewDeadline            time.Duration
	retryPeriod              time.Duration
	healthzTimeout           time.Duration
	metricsAddress           string
	healthzAddress           string
}

func main() {
	var o options
	fs := flag.CommandLine
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty uses the in-cluster configuration")
	fs.StringVar(&o.apiServerHost, "master", "", "API server address; overrides the kubeconfig's")
	fs.Float64Var(&o.qps, "kube-api-qps", 20, "client QPS when the API server has no priority and fairness")
	fs.IntVar(&o.burst, "kube-api-burst", 50, "client burst when the API server has no priority and fairness")
	fs.StringVar(&o.namespace, "namespace", "", "watch only this namespace (empty: all)")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "kube-system", "namespace of the Secrets ClusterIssuers refer to")
	fs.StringVar(&o.controllers, "controllers", "*", "comma-separated controllers to run; * is every one compiled in, -name turns one off")
	fs.IntVar(&o.workers, "concurrent-workers", 5, "workers per controller")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run the controllers only while holding the Lease cert-manager-controller")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "kube-system", "namespace of the leader election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 60*time.Second, "leader election lease duration")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 40*time.Second, "leader election renew deadline")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 15*time.Second, "leader election retry period")
	fs.DurationVar(&o.healthzTimeout, "leader-election-healthz-timeout", 20*time.Second, "how long past the lease /livez tolerates a leader that stopped renewing")
	fs.StringVar(&o.metricsAddress, "metrics-listen-address", "0.0.0.0:9402", "Prometheus metrics address")
	fs.StringVar(&o.healthzAddress, "healthz-listen-address", "0.0.0.0:9403", "/livez address")
	klog.InitFlags(fs)
	version := fs.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Printf("cert-manager controller %s (kube-node-ready test build)\n", util.AppVersion)
		return
	}
	logf.InitLogs()
	defer logf.FlushLogs()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, o); err != nil {
		logf.Log.Error(err, "controller exited")
		logf.FlushLogs()
		os.Exit(1)
	}
}

// enabled is the set of compiled-in controllers --controllers selects.
func enabled(spec string, known []string, namespaced bool) ([]string, error) {
	var on []string
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case item == "*":
			on = append(on, known...)
		case strings.HasPrefix(item, "-"):
			on = slices.DeleteFunc(on, func(n string) bool { return n == item[1:] })
		case slices.Contains(known, item):
			on = append(on, item)
		default:
			return nil, fmt.Errorf("--controllers: %q is not compiled into this build (have %s)", item, strings.Join(known, ", "))
		}
	}
	if namespaced {
		// ClusterIssuers are cluster-scoped: a controller watching one namespace cannot serve them.
		on = slices.DeleteFunc(on, func(n string) bool { return n == clusterissuers.ControllerName })
	}
	slices.Sort(on)
	return slices.Compact(on), nil
}

func run(ctx context.Context, o options) error {
	log := logf.FromContext(ctx)
	var known []string
	for name := range controller.Known() {
		known = append(known, name)
	}
	sort.Strings(known)
	names, err := enabled(o.controllers, known, o.namespace != "")
	if err != nil {
		return err
	}
	log.Info("starting", "version", util.AppVersion, "controllers", names)

	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		APIServerHost:      o.apiServerHost,
		Kubeconfig:         o.kubeconfig,
		KubernetesAPIQPS:   float32(o.qps),
		KubernetesAPIBurst: o.burst,
		Namespace:          o.namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        o.clusterResourceNamespace,
			ClusterIssuerAmbientCredentials: true,
		},
		CertificateOptions: controller.CertificateOptions{
			// cert-manager's defaults: annotations copied from a Certificate
			// to its requests, and the backoff after a failed request.
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("controller context: %w", err)
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)

	metricsLn, err := net.Listen("tcp", o.metricsAddress)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	metrics := base.Metrics.NewServer(metricsLn)
	g.Go(func() error {
		if err := metrics.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return metrics.Shutdown(shutdown)
	})
	healthzLn, err := net.Listen("tcp", o.healthzAddress)
	if err != nil {
		return fmt.Errorf("healthz listener: %w", err)
	}
	health := healthz.NewServer(o.healthzTimeout)
	g.Go(func() error { return health.Start(ctx, healthzLn) })

	elected := make(chan struct{})
	if o.leaderElect {
		g.Go(func() error { return leaderElect(ctx, factory, o, health, elected) })
	} else {
		close(elected)
	}
	select {
	case <-ctx.Done():
		return g.Wait()
	case <-elected:
	}
	log.Info("leading: starting controllers")
	for _, name := range names {
		ctrl, err := controller.Known()[name](factory)
		if err != nil {
			cancel()
			return errors.Join(fmt.Errorf("controller %s: %w", name, err), g.Wait())
		}
		g.Go(func() error { return ctrl.Run(o.workers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}

// leaderElect holds the Lease cert-manager-controller, as cert-manager's
// controller does, and closes elected once it leads; losing it is an error
// so the process exits and another replica takes over.
func leaderElect(ctx context.Context, factory *controller.ContextFactory, o options, health *healthz.Server, elected chan<- struct{}) error {
	lctx, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaderElectionNamespace, "cert-manager-controller",
		lctx.Client.CoreV1(), lctx.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "-external-cert-manager-controller", EventRecorder: lctx.Recorder})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        health.LeaderHealthzAdaptor,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("leader election lost")
}
