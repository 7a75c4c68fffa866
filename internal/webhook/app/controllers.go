package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup/plugins"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/leader"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/nodecleanup"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
)

// startNodeControllers starts what acts on Nodes after admission: the Node
// informer on every replica; back-fill and cleanup (nodecleanup),
// remediation and the missed-node reporter on the leader only. configs
// receives the cleanup configuration's loader, for /readyz.
func startNodeControllers(ctx context.Context, wg *sync.WaitGroup, conf *Config, cfg *rest.Config, reg prometheus.Registerer, configs *atomic.Pointer[cleanup.Loader], sw *suspend.Switch, log *slog.Logger) error {
	opts := conf.Options
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("watcher: metadata client: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("watcher: client: %w", err)
	}
	// Before anything adds the finalizer: admission serves after this returns.
	if err := recordFinalizer(ctx, opts, client, mc, log); err != nil {
		return err
	}
	// Events are best effort and must not eat the cleanup's request budget:
	// their own client, so their own rate limiter.
	eventClient, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return fmt.Errorf("watcher: events client: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: eventClient.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("watcher: start event recording: %w", err)
	}
	wg.Go(func() { <-ctx.Done(); broadcaster.Shutdown() })
	recorder := broadcaster.NewRecorder(scheme.Scheme, "kube-node-ready-webhook")
	identity := replicaIdentity(opts.PodName)

	wcfg := nodecleanup.Config{
		Finalizer:       opts.Finalizer,
		Legacy:          opts.LegacyFinalizers,
		SkipAnnotation:  opts.SkipAnnotation,
		KeepAnnotations: keptAnnotations(opts),
		Backfill:        opts.Backfill,
		BackfillWorkers: opts.BackfillWorkers,
		Cleanup:         opts.Cleanup,
		CleanupWorkers:  opts.CleanupWorkers,
		RetryBase:       opts.CleanupRetryBase,
		RetryMax:        opts.CleanupRetryMax,
		Deadline:        opts.CleanupDeadline.D,
		MinAttempts:     opts.CleanupDeadlineMinAttempts,
		Recorder:        recorder,
		Clock:           clock.RealClock{},
	}
	if opts.Cleanup {
		loader, err := startConfig(ctx, wg, opts, client, recorder, reg, log)
		if err != nil {
			return err
		}
		wcfg.Pipeline = loader.Pipeline
		wcfg.ConfigError = loader.Err
		configs.Store(loader)
		if opts.PluginHealthInterval > 0 {
			health, err := startHealth(ctx, wg, opts, loader, recorder, reg, log)
			if err != nil {
				return err
			}
			wcfg.Health = health
		}
	}
	if opts.WebhookConfigName != "" {
		wcfg.BackfillAllowed = webhookConfigPresent(client, opts.WebhookConfigName, log)
	}
	factory := metadatainformer.NewSharedInformerFactory(mc, opts.ResyncPeriod)
	ctrl, err := nodecleanup.New(mc, factory, wcfg, reg, log.With("component", "watcher"))
	if err != nil {
		return err
	}
	rem, err := newRemediation(conf.Remediation, conf.ReplaceOnlyReports, cfg, client, ctrl.NodeCount, recorder, reg, sw, log)
	if err != nil {
		return err
	}
	var missed *missedReporter
	if opts.InjectStartupTaint {
		if missed, err = newMissedReporter(factory.ForResource(nodecleanup.NodesResource).Informer(), recorder, reg, log.With("component", "startup-taint")); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	wg.Go(func() { <-ctx.Done(); factory.Shutdown() })
	lead := func(ctx context.Context) {
		var both sync.WaitGroup
		if rem != nil {
			both.Go(func() {
				if err := rem.Lead(ctx); err != nil && ctx.Err() == nil {
					log.Error("remediation stopped", "error", err)
				}
			})
		}
		if missed != nil {
			both.Go(func() { missed.Lead(ctx) })
		}
		if err := ctrl.Lead(ctx); err != nil && ctx.Err() == nil {
			log.Error("node watcher stopped", "error", err)
		}
		both.Wait()
	}
	wg.Go(func() {
		if !opts.LeaderElect {
			lead(ctx)
			return
		}
		err := leader.RunElected(ctx, leader.Election{
			Client: client, Namespace: opts.LeaseNS(), Name: opts.LeaseName, Identity: identity,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod,
		}, log.With("component", "leader-election"), lead)
		if err != nil {
			log.Error("leader election stopped", "error", err)
		}
	})
	return nil
}

// keptAnnotations are the annotations read from the node watcher's cache
// by others than the watcher: the missed-node reporter's admission mark.
func keptAnnotations(opts Options) []string {
	if opts.InjectStartupTaint {
		return []string{api.StartupTaintAdmissionAnnotation}
	}
	return nil
}

// newRemediation builds the remediation controller from rc (Resolve's),
// or nil when --remediation=off (rc nil).
func newRemediation(rc *remediate.Config, replaceOnlyReports bool, cfg *rest.Config, client kubernetes.Interface, total func() int, recorder events.EventRecorder, reg prometheus.Registerer, sw *suspend.Switch, log *slog.Logger) (*remediate.Controller, error) {
	if rc == nil {
		return nil, nil
	}
	if replaceOnlyReports {
		log.Info("observe mode: --remediation=replace only reports")
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("remediation: dynamic client: %w", err)
	}
	c := *rc
	c.Clock, c.TotalNodes, c.Recorder, c.Suspend = clock.RealClock{}, total, recorder, sw
	return remediate.New(client, dyn, c, reg, log.With("component", "remediation"))
}

// startConfig loads the cleanup configuration and keeps reloading it. An
// invalid file (or a Secret file it names that is missing) does not stop
// the start: admission and back-fill never depend on it. Node deletions are
// held instead, which the log, a Warning Event on the Pod, the metric
// node_cleanup_config_valid and /readyz say, until a reload succeeds.
func startConfig(ctx context.Context, wg *sync.WaitGroup, opts Options, client kubernetes.Interface, recorder events.EventRecorder, reg prometheus.Registerer, log *slog.Logger) (*cleanup.Loader, error) {
	metrics, err := cleanup.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	log = log.With("component", "cleanup")
	loader := &cleanup.Loader{
		Path:    opts.ConfigFile,
		Table:   plugins.Builtins(),
		Deps:    cleanup.Deps{Client: client, HTTP: &http.Client{}, Log: log, SecretsDir: opts.SecretsDir, Recorder: recorder},
		DryRun:  opts.DryRun,
		Metrics: metrics,
		Log:     log,
		Clock:   clock.RealClock{},
	}
	loader.OnInvalid = func(err error) {
		if opts.PodName == "" {
			return
		}
		what := "configuration reload failed; keeping the previous configuration: "
		if loader.Pipeline() == nil {
			what = "configuration invalid; node deletions are held until it is fixed (admission and back-fill run): "
		}
		ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: opts.Namespace, Name: opts.PodName}
		recorder.Eventf(ref, nil, corev1.EventTypeWarning, api.EventCleanupConfigInvalid, "Reload", "%s", eventnote.Shorten(what+err.Error()))
	}
	if err := loader.RegisterMetrics(reg); err != nil {
		return nil, err
	}
	if err := loader.Load(); err != nil {
		log.Error("cleanup configuration invalid; admission and back-fill run, node deletions are held until it is fixed", "path", opts.ConfigFile, "error", err.Error())
		loader.OnInvalid(err)
	} else {
		p := loader.Pipeline()
		log.Info("cleanup configuration loaded", "path", opts.ConfigFile, "plugins", p.Names(), "dry_run", p.DryRun())
	}
	wg.Go(func() { loader.Watch(ctx, opts.ConfigReloadInterval) })
	return loader, nil
}

// startHealth probes the plugins that offer a health probe every
// --plugin-health-interval, on every replica (each exports its own
// metric); a change is logged and recorded as an Event on the Pod.
func startHealth(ctx context.Context, wg *sync.WaitGroup, opts Options, loader *cleanup.Loader, recorder events.EventRecorder, reg prometheus.Registerer, log *slog.Logger) (*cleanup.Health, error) {
	health, err := cleanup.NewHealth(reg, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	log = log.With("component", "plugin-health")
	health.OnChange = func(plugin string, err error) {
		var ref *corev1.ObjectReference
		if opts.PodName != "" {
			ref = &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: opts.Namespace, Name: opts.PodName}
		}
		if err != nil {
			log.Warn("cleanup plugin unhealthy", "plugin", plugin, "error", err.Error())
			if ref != nil {
				recorder.Eventf(ref, nil, corev1.EventTypeWarning, api.EventCleanupPluginUnhealthy, "HealthProbe", "%s",
					eventnote.Shorten(fmt.Sprintf("cleanup plugin %s: %s; it is not run until its probe passes", plugin, err)))
			}
			return
		}
		log.Info("cleanup plugin healthy again", "plugin", plugin)
		if ref != nil {
			recorder.Eventf(ref, nil, corev1.EventTypeNormal, api.EventCleanupPluginHealthy, "HealthProbe", "cleanup plugin %s: health probe passes again", plugin)
		}
	}
	wg.Go(func() { health.Watch(ctx, opts.PluginHealthInterval, loader.Pipeline) })
	return health, nil
}

// webhookConfigPresent answers "is the MutatingWebhookConfiguration still
// there?", cached for a second. remove-finalizers deletes it first, so
// a running leader stops re-adding finalizers during uninstall.
func webhookConfigPresent(client kubernetes.Interface, name string, log *slog.Logger) func(context.Context) bool {
	var mu sync.Mutex
	var checked time.Time
	var present bool
	return func(ctx context.Context) bool {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(checked) < time.Second {
			return present
		}
		_, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if present || checked.IsZero() {
				log.Warn("back-fill paused: the MutatingWebhookConfiguration is gone (uninstalling?)", "name", name)
			}
			present = false
		case err != nil:
			// Unknown: keep back-filling (a stranded node is worse than an extra finalizer).
			log.Debug("cannot read the webhook configuration", "name", name, "error", err)
			present = true
		default:
			present = true
		}
		checked = time.Now()
		return present
	}
}

// replicaIdentity is unique per process: a restarted pod with the same name
// must not inherit the old process's Lease.
func replicaIdentity(podName string) string {
	if podName == "" {
		podName, _ = os.Hostname()
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return podName + "_" + hex.EncodeToString(b)
}
