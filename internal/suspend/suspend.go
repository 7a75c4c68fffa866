// Package suspend is the operator's live switch, `kubectl node-ready
// suspend` and `resume`: one ConfigMap in the release's namespace
// (api.SuspendConfigMap) that the agents and the webhook watch. While it
// exists the actions that can harm a cluster hold everywhere: no agent
// re-taints its node, remediation replaces nothing and admission adds no
// startup taint. Untaints and cleanup go on: they are the safe direction.
//
// A switch that cannot be read (not read yet, forbidden, the API server
// away) holds too: not tainting and not deleting is the safe side.
package suspend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
)

// State is the switch as one read found it.
type State struct {
	// Known is false until the switch was read, and while the latest read
	// failed (Err says why): harmful actions then hold too.
	Known bool
	// On is set while the ConfigMap exists, whatever its data.
	On bool
	// Reason, By and Since are the ConfigMap's data, for people.
	Reason, By, Since string
	// Err is why the latest read failed; nil when Known or not read yet.
	Err error
}

// Holds says whether the actions the switch stops must wait: it is on, or
// it cannot be read.
func (s State) Holds() bool { return s.On || !s.Known }

// Why says why the actions hold, for logs and Events; "" when they do not.
func (s State) Why() string {
	switch {
	case !s.Known && s.Err != nil:
		return "the suspend switch cannot be read (" + s.Err.Error() + ")"
	case !s.Known:
		return "the suspend switch is not read yet"
	case s.On:
		return "suspended by an operator" + s.Detail()
	}
	return ""
}

// Detail is " (by X, since T): reason" from the data present.
func (s State) Detail() string {
	var who []string
	if s.By != "" {
		who = append(who, "by "+s.By)
	}
	if s.Since != "" {
		who = append(who, "since "+s.Since)
	}
	out := ""
	if len(who) > 0 {
		out = " (" + strings.Join(who, ", ") + ")"
	}
	if s.Reason != "" {
		out += ": " + s.Reason
	}
	return out
}

// same says whether a and b would be told alike.
func same(a, b State) bool {
	return a.Known == b.Known && (a.Err == nil) == (b.Err == nil) &&
		a.On == b.On && a.Reason == b.Reason && a.By == b.By && a.Since == b.Since
}

// Of is the state a read of the switch found: cm nil is off.
func Of(cm *corev1.ConfigMap) State {
	if cm == nil {
		return State{Known: true}
	}
	return State{Known: true, On: true,
		Reason: cm.Data[api.SuspendReasonKey], By: cm.Data[api.SuspendByKey], Since: cm.Data[api.SuspendSinceKey]}
}

// ConfigMap is the switch as `kubectl node-ready suspend` writes it; now is
// the writer's clock, kept for people (no binary judges it).
func ConfigMap(namespace, name, reason, by string, now time.Time) *corev1.ConfigMap {
	data := map[string]string{api.SuspendReasonKey: reason, api.SuspendSinceKey: now.UTC().Format(time.RFC3339)}
	if by != "" {
		data[api.SuspendByKey] = by
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{"app.kubernetes.io/part-of": "kube-node-ready"}},
		Data: data,
	}
}

// NewGauge is the series both binaries export:
// node_ready_suspended is 1 while the switch is on as the process last read it.
func NewGauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "node_ready_suspended",
		Help: "1 while the operator's suspend switch (kubectl node-ready suspend) is on, as this process last read it: no re-taint, no replacement, no startup taint added; 0 otherwise.",
	})
}

// Switch follows the switch with a watch on its one ConfigMap (a field
// selector on its name: the RBAC grant names it) and reads it fresh on
// demand. Create it with New, then Run it.
type Switch struct {
	client    kubernetes.Interface
	namespace string
	name      string
	log       *slog.Logger
	gauge     prometheus.Gauge
	informer  cache.SharedIndexInformer

	mu sync.Mutex
	// failing is why the latest list or watch failed; nil once one is
	// accepted again.
	failing error
	state   State
}

// New follows namespace/name on client. gauge (may be nil) is set on
// every change; log tells each change once.
func New(client kubernetes.Interface, namespace, name string, gauge prometheus.Gauge, log *slog.Logger) *Switch {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Switch{client: client, namespace: namespace, name: name, gauge: gauge,
		log: log.With("suspend_switch", namespace+"/"+name)}
	one := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = one
			l, err := client.CoreV1().ConfigMaps(namespace).List(ctx, o)
			s.served(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = one
			w, err := client.CoreV1().ConfigMaps(namespace).Watch(ctx, o)
			s.served(err)
			return w, err
		},
	}
	s.informer = cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.ConfigMap{}, 0, cache.Indexers{})
	// Errors are told once per episode (set): client-go would log every retry.
	_ = s.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) {
			return // the watch starts again from a new list: nothing unknown
		}
		s.served(err)
	})
	_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.refresh() },
		UpdateFunc: func(_, _ any) { s.refresh() },
		DeleteFunc: func(any) { s.refresh() },
	})
	return s
}

// Run watches until ctx ends.
func (s *Switch) Run(ctx context.Context) {
	go s.informer.RunWithContext(ctx)
	if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		s.refresh() // an absent switch brings no event
	}
	<-ctx.Done()
}

// HasSynced says whether the watch has listed once.
func (s *Switch) HasSynced() bool { return s.informer.HasSynced() }

// State is the switch as the watch last saw it.
func (s *Switch) State() State {
	if s == nil {
		return State{Known: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Read reads the switch from the API server now (a consistent read, not
// the watch's copy), for a gate right before a harmful action: a suspend
// the watch has not delivered yet still stops it. A failed read holds.
func (s *Switch) Read(ctx context.Context) (State, error) {
	if s == nil {
		return State{Known: true}, nil
	}
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Of(nil), nil
	case err != nil:
		err = fmt.Errorf("read ConfigMap %s/%s: %w", s.namespace, s.name, err)
		return State{Err: err}, err
	}
	return Of(cm), nil
}

// served records how a list or watch request went: a failure makes the
// switch unknown until one is accepted again.
func (s *Switch) served(err error) {
	s.mu.Lock()
	s.failing = err
	s.mu.Unlock()
	s.refresh()
}

// refresh takes the state from the watch's copy: unknown until it has
// listed and while its requests fail.
func (s *Switch) refresh() {
	s.mu.Lock()
	failing := s.failing
	s.mu.Unlock()
	if failing != nil {
		s.set(State{Err: failing})
		return
	}
	if !s.informer.HasSynced() {
		s.set(State{})
		return
	}
	obj, ok, err := s.informer.GetStore().GetByKey(s.namespace + "/" + s.name)
	if err != nil {
		return
	}
	var cm *corev1.ConfigMap
	if ok {
		cm, _ = obj.(*corev1.ConfigMap)
	}
	s.set(Of(cm))
}

// set records st, and on a change sets the gauge and logs it once.
func (s *Switch) set(st State) {
	s.mu.Lock()
	defer s.mu.Unlock() // one change told at a time, in order
	old := s.state
	s.state = st
	if same(old, st) {
		return
	}
	if s.gauge != nil {
		s.gauge.Set(metricsserver.Bool(st.On))
	}
	switch {
	case !st.Known && (st.Err == nil || old.Err != nil):
		// Not read yet, or still unreadable: nothing new to tell.
	case !st.Known:
		s.log.Warn("cannot read the suspend switch: re-taints, replacements and startup taints hold until it can be read", "error", st.Err)
	case st.On:
		s.log.Warn("suspended by an operator: no re-taint, no replacement, no startup taint added; untaints and cleanup go on",
			"reason", st.Reason, "by", st.By, "since", st.Since)
	case old.On || old.Err != nil:
		s.log.Info("the suspend switch is off: re-taints, replacements and startup taints resume")
	}
}
