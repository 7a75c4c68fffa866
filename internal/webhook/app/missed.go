package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
)

// missedInterval is how often the leader looks for such nodes in its cache.
const missedInterval = 10 * time.Second

// missedReporter names, on the leader, the nodes that joined without
// admission (startuptaint.Missed): a Warning Event on each, once per
// leader term, and the gauge of how many there are now. Its state is the
// set of nodes already told, owned by its loop.
type missedReporter struct {
	nodes    cache.Store
	synced   cache.InformerSynced
	recorder events.EventRecorder
	gauge    prometheus.Gauge
	clock    clock.WithTicker
	log      *slog.Logger
}

func newMissedReporter(inf cache.SharedIndexInformer, recorder events.EventRecorder, reg prometheus.Registerer, log *slog.Logger) (*missedReporter, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "node_cleanup_webhook_startup_taint_missed_nodes",
		Help: "Nodes that joined without the webhook's admission while startup taint injection was on (no infra.894.io/startup-taint mark, created after the oldest marked node): not held for verification unless their creator tainted them. Set by the leader.",
	})
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("startup taint: register metrics: %w", err)
	}
	return &missedReporter{nodes: inf.GetStore(), synced: inf.HasSynced, recorder: recorder, gauge: g, clock: clock.RealClock{}, log: log}, nil
}

// Lead reports until ctx ends.
func (r *missedReporter) Lead(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), r.synced) {
		return
	}
	told := map[string]bool{}
	t := r.clock.NewTicker(missedInterval)
	defer t.Stop()
	for {
		r.scan(told)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// scan reports the nodes missed now that were not told yet.
func (r *missedReporter) scan(told map[string]bool) {
	var objs []metav1.Object
	for _, o := range r.nodes.List() {
		if m, ok := o.(metav1.Object); ok {
			objs = append(objs, m)
		}
	}
	missed := startuptaint.Missed(objs)
	r.gauge.Set(float64(len(missed)))
	for _, name := range missed {
		if told[name] {
			continue
		}
		told[name] = true
		r.log.Warn("node joined without the webhook's admission: no startup taint was decided for it (the webhook was down or not called)", "node", name)
		ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name}
		r.recorder.Eventf(ref, nil, corev1.EventTypeWarning, api.EventStartupTaintMissed, "Admission",
			"node joined without the webhook's admission (the webhook was down or not called): no startup taint was added, so it was not held for verification unless its creator tainted it")
	}
}
