// Package app is the webhook binary's front, as internal/agent/app is the
// agent's: its configuration (one Options struct, flags with KNR_WEBHOOK_*
// environment twins, validation, in the agent's shape), the wiring of
// certificates, the TLS admission endpoint, the node controllers and the
// metrics/health endpoint, and the uninstall command.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/internal/kubeconfig"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
	"github.com/kube-node-ready/kube-node-ready/internal/version"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/admission"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/certs"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// Path is where the admission endpoint answers.
const Path = "/mutate-node"

// Run serves until ctx ends, then shuts down within opts.ShutdownGrace.
func Run(ctx context.Context, conf *Config, log *slog.Logger) error {
	opts := conf.Options
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		version.BuildInfo("node_cleanup_webhook_build_info", "Build of the running webhook; always 1.")} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}

	store := &certs.Store{}
	var listening atomic.Bool // ready = a certificate and an open admission listener
	var configs atomic.Pointer[cleanup.Loader]
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Health first, so a probe can tell "starting" from "dead", and a port
	// clash stops the start at once.
	healthLn, err := metricsserver.Listen(opts.MetricsAddress)
	if err != nil {
		return err
	}
	health := metricsserver.Endpoints{
		Gatherer: reg,
		Ready: func() error {
			if !listening.Load() || !store.Ready() {
				return errors.New("not serving admission yet (no certificate)")
			}
			return nil
		},
		// An invalid cleanup configuration holds deletions but must not take
		// admission out of service: ready, with the reason.
		Degraded: func() string {
			if l := configs.Load(); l != nil {
				if err := l.Err(); err != nil {
					return "cleanup configuration invalid, node deletions held: " + err.Error()
				}
			}
			return ""
		},
		Grace: opts.ShutdownGrace,
		Log:   log,
	}
	wg.Go(func() {
		if err := metricsserver.Serve(ctx, healthLn, health); err != nil {
			log.Error("metrics server stopped", "error", err)
		}
	})

	var cfg *rest.Config
	if opts.NeedsClient() {
		if cfg, err = restConfig(opts.Kubeconfig, opts.KubeAPIQPS, opts.KubeAPIBurst); err != nil {
			return err
		}
	}

	if err := startCertificates(ctx, &wg, opts, cfg, store, log); err != nil {
		return err
	}
	if len(opts.ExternalNames) > 0 {
		if err := startExternalNames(ctx, &wg, opts, cfg, reg, log); err != nil {
			return err
		}
	}
	sw, err := startSuspend(ctx, &wg, opts, cfg, reg, log)
	if err != nil {
		return err
	}
	peerSlices, err := startPeerSliceNames(ctx, &wg, opts, cfg, log)
	if err != nil {
		return err
	}
	if opts.NeedsWatcher() {
		if err := startNodeControllers(ctx, &wg, conf, cfg, reg, &configs, sw, log); err != nil {
			return err
		}
	}

	// No listener until there is a certificate: a replica never answers a
	// handshake it cannot complete.
	if err := waitReady(ctx, store, log); err != nil {
		return err
	}
	admissionMetrics, err := admission.NewMetrics(reg)
	if err != nil {
		return err
	}
	injector, err := newInjector(conf.StartupTaint, cfg, sw)
	if err != nil {
		return err
	}
	handler := &admission.Handler{
		Finalizer:    opts.Finalizer,
		MaxBodyBytes: opts.MaxBodyBytes,
		Metrics:      admissionMetrics,
		Log:          log,
		StartupTaint: injector,
	}
	if peerSlices != nil {
		handler.PeerSlices = peerSlices
	}
	mux := http.NewServeMux()
	mux.Handle(Path, handler)
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         store.TLSConfig(opts.ClientCAFile != ""),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	ln, err := net.Listen("tcp", opts.ListenAddress)
	if err != nil {
		return fmt.Errorf("listen %s: %w", opts.ListenAddress, err)
	}
	listening.Store(true)
	log.Info("admission webhook serving", "address", ln.Addr().String(), "path", Path, "cert_mode", opts.CertMode, "client_cert_required", opts.ClientCAFile != "")
	err = serveTLSUntil(ctx, srv, ln, opts.ShutdownGrace, log)
	cancel()
	return err
}

func restConfig(path string, qps float64, burst int) (*rest.Config, error) {
	cfg, err := kubeconfig.Load(path, "kube-node-ready-webhook/"+version.Version)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (set --kubeconfig, run in a cluster, or pass --cleanup=false --backfill=false for an admission-only replica in files mode): %w", err)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	return cfg, nil
}

func startCertificates(ctx context.Context, wg *sync.WaitGroup, opts Options, cfg *rest.Config, store *certs.Store, log *slog.Logger) error {
	log = log.With("component", "certs")
	if opts.CertMode == CertModeFiles {
		src := &certs.FileSource{CertFile: opts.TLSCertFile, KeyFile: opts.TLSKeyFile, ClientCAFile: opts.ClientCAFile, Store: store, Log: log}
		wg.Go(func() {
			// Files may appear after start (a Secret volume still syncing).
			for err := src.Load(); err != nil; err = src.Load() {
				log.Error("certificate files not loadable yet", "error", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(opts.TLSReloadInterval):
				}
			}
			src.Run(ctx, opts.TLSReloadInterval)
		})
		return nil
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("certs: client: %w", err)
	}
	dns, ips := opts.SANs()
	m := &certs.SelfManaged{
		Client: client, Namespace: opts.Namespace, SecretName: opts.CertSecretName,
		DNSNames: dns, IPs: ips,
		CAValidity: opts.CAValidity, CertValidity: opts.CertValidity, RenewBefore: opts.CertRenewBefore,
		WebhookConfigName: opts.WebhookConfigName, Store: store, Log: log,
	}
	wg.Go(func() { m.Run(ctx, opts.CertSyncInterval) })
	return nil
}

func waitReady(ctx context.Context, store *certs.Store, log *slog.Logger) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	warn := time.After(10 * time.Second)
	for !store.Ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-warn:
			log.Warn("still waiting for a serving certificate")
		case <-t.C:
		}
	}
	return nil
}

// serveTLSUntil serves admission on ln until ctx ends, then shuts the server
// down, giving in-flight requests up to grace.
func serveTLSUntil(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve %s: %w", ln.Addr(), err)
		}
		return nil
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown incomplete", "address", ln.Addr().String(), "error", err)
	}
	return nil
}
