package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks/dnsquery"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
)

// The external names the agents' dns check resolves, resolved from the
// webhook's own pod (one pod in the cluster's network, with the cluster's
// resolver, like any agent's): a name that does not resolve here fails the
// dns check of every agent whose resolver answers the same, and
// `kubectl node-ready doctor` says so from the Events recorded here.

const (
	// externalNamesPeriod is the time between rounds: the agents' period.
	externalNamesPeriod = time.Minute
	// externalNameTimeout bounds one name's questions: the agents' check timeout.
	externalNameTimeout = 3 * time.Second
	// resolvConf is the pod's resolver, which the agents' dns check uses too.
	resolvConf = "/etc/resolv.conf"
)

// nameEvent is an Event about one name.
type nameEvent struct {
	eventType, reason, name, note string
}

// judgeExternalNames turns a round's results (name -> error, nil when it
// resolved) into Events: a name that does not resolve gets a Warning at
// every round (the recorder folds repeats into one series, which keeps it
// from expiring while the name stays unresolved); one that resolves gets a
// Normal Event at the first round (known is nil) and when it did not
// before. It returns the names that did not resolve, for the next round.
func judgeExternalNames(known map[string]bool, results map[string]error) ([]nameEvent, map[string]bool) {
	failing := map[string]bool{}
	var out []nameEvent
	for _, name := range slices.Sorted(maps.Keys(results)) {
		err := results[name]
		if err != nil {
			failing[name] = true
			out = append(out, nameEvent{corev1.EventTypeWarning, api.EventExternalNameUnresolved, name,
				eventnote.Shorten(fmt.Sprintf("external name %s does not resolve from this pod: %v", name, err))})
			continue
		}
		if known == nil || known[name] {
			out = append(out, nameEvent{corev1.EventTypeNormal, api.EventExternalNameResolved, name,
				fmt.Sprintf("external name %s resolves from this pod", name)})
		}
	}
	return out, failing
}

// externalNames resolves names every externalNamesPeriod and reports each
// round: the gauge, a log line when a name changes, and Events.
type externalNames struct {
	names   []string
	resolve func(ctx context.Context, name string) error
	clock   clock.WithTicker
	// record records an Event on the webhook's Pod; nil records none.
	record     func(e nameEvent)
	unresolved prometheus.Gauge
	log        *slog.Logger

	failing map[string]bool // owned by Run; nil before the first round
}

// Run resolves the names now, then every externalNamesPeriod, until ctx ends.
func (x *externalNames) Run(ctx context.Context) {
	t := x.clock.NewTicker(externalNamesPeriod)
	defer t.Stop()
	for {
		x.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// round resolves every name at once and reports the results.
func (x *externalNames) round(ctx context.Context) {
	results := make(map[string]error, len(x.names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range x.names {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, externalNameTimeout)
			defer cancel()
			err := x.resolve(nctx, name)
			mu.Lock()
			results[name] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // shutting down: the failures are ours
	}
	events, failing := judgeExternalNames(x.failing, results)
	for _, name := range slices.Sorted(maps.Keys(results)) {
		switch was := x.failing != nil && x.failing[name]; {
		case failing[name] && !was:
			x.log.Warn("external name does not resolve from this pod", "name", name, "error", results[name].Error())
		case !failing[name] && was:
			x.log.Info("external name resolves again from this pod", "name", name)
		}
	}
	x.failing = failing
	x.unresolved.Set(float64(len(failing)))
	if x.record != nil {
		for _, e := range events {
			x.record(e)
		}
	}
}

// resolveWith resolves a name at server, or when it is empty through the
// first nameserver of the resolver configuration at path, as the agents'
// dns check does (the name as given, no search list): it resolves when an A
// or an AAAA question, asked at once, answers with an address.
func resolveWith(path, server string) func(ctx context.Context, name string) error {
	return func(ctx context.Context, name string) error {
		if server == "" {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			servers, err := dnsquery.ParseResolvConf(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			server = servers[0]
		}
		errs := make(chan error, 2)
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			go func() {
				addrs, err := dnsquery.Lookup(ctx, server, name, qtype)
				if err == nil && len(addrs) == 0 {
					err = fmt.Errorf("query %s via %s (%s): no address", name, server, dns.TypeToString[qtype])
				}
				errs <- err
			}()
		}
		var all []error
		for range 2 {
			err := <-errs
			if err == nil {
				return nil
			}
			all = append(all, err)
		}
		return errors.Join(all...)
	}
}

// startExternalNames runs the external names' rounds, with Events on this
// replica's Pod when it knows its name and has a client.
func startExternalNames(ctx context.Context, wg *sync.WaitGroup, opts Options, cfg *rest.Config, reg prometheus.Registerer, log *slog.Logger) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "node_cleanup_webhook_external_names_unresolved",
		Help: "External names (--" + api.ExternalNamesFlag + ") that did not resolve from this pod in the latest round.",
	})
	if err := reg.Register(g); err != nil {
		return err
	}
	x := &externalNames{names: opts.ExternalNames, resolve: resolveWith(resolvConf, ""), clock: clock.RealClock{},
		unresolved: g, log: log.With("component", "external-names")}
	if cfg != nil && opts.PodName != "" {
		// Its own client and broadcaster: best effort, off the cleanup's
		// request budget, and running in admission-only replicas too.
		client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
		if err != nil {
			return fmt.Errorf("external names: events client: %w", err)
		}
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
		if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
			return fmt.Errorf("external names: start event recording: %w", err)
		}
		wg.Go(func() { <-ctx.Done(); broadcaster.Shutdown() })
		recorder := broadcaster.NewRecorder(scheme.Scheme, "kube-node-ready-webhook")
		ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: opts.Namespace, Name: opts.PodName}
		x.record = func(e nameEvent) { recorder.Eventf(ref, nil, e.eventType, e.reason, e.name, "%s", e.note) }
	}
	wg.Go(func() { x.Run(ctx) })
	return nil
}
