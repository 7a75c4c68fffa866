package nodecleanup

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

const skipAnnotation = "infra.894.io/skip-cleanup"

// fixture is the node-cleanup controller against client-go's fake metadata
// client, in sample-controller's style: the objects the API server holds,
// the objects in the informer's cache (filled directly, the informer is not
// started), and the requests a sync is expected to send.
type fixture struct {
	t       *testing.T
	client  *metadatafake.FakeMetadataClient
	factory metadatainformer.SharedInformerFactory
	c       *Controller
	events  *events.FakeRecorder
	reg     *prometheus.Registry
	// pipeline is what Config.Pipeline returns (nil: no valid configuration).
	pipeline *cleanup.Pipeline
}

// newFixture serves nodes from the fake API server and the cache, to a
// controller with back-fill and cleanup on and the log plugin's defaults
// changed by cfg.
func newFixture(t *testing.T, cfg func(*Config), nodes ...*metav1.PartialObjectMetadata) *fixture {
	t.Helper()
	f := newServingFixture(t, cfg, nodes...)
	for _, n := range nodes {
		f.cache(n)
	}
	return f
}

// newServingFixture is newFixture with the nodes in the fake API server
// only, for a test that starts the informer: its first list brings them as
// additions, which the controller's HasSynced waits for before Lead starts.
// A node already in the cache would come as an update of itself (same
// resourceVersion, taken for a resync), which HasSynced does not wait for:
// arriving after Lead's queue exists, it queues the node again at once, a
// second attempt at the first's heels.
func newServingFixture(t *testing.T, cfg func(*Config), nodes ...*metav1.PartialObjectMetadata) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, n.DeepCopy())
	}
	f := &fixture{t: t, client: metadatafake.NewSimpleMetadataClient(scheme, objs...), events: events.NewFakeRecorder(100), reg: prometheus.NewRegistry()}
	f.invalidOnFailedTest()
	f.factory = metadatainformer.NewSharedInformerFactory(f.client, 0)
	config := Config{
		Finalizer: fin, SkipAnnotation: skipAnnotation,
		Backfill: true, BackfillWorkers: 1, Cleanup: true, CleanupWorkers: 1,
		RetryBase: time.Second, RetryMax: time.Minute, MinAttempts: 3,
		Pipeline: func() *cleanup.Pipeline { return f.pipeline },
		Recorder: f.events,
	}
	if cfg != nil {
		cfg(&config)
	}
	c, err := New(f.client, f.factory, config, f.reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

// invalidOnFailedTest answers a JSON patch whose test op fails with 422
// Invalid, as the API server does (the fake returns a bare error).
func (f *fixture) invalidOnFailedTest() {
	apply := core.ObjectReaction(f.client.Tracker())
	f.client.PrependReactor("patch", "nodes", func(a core.Action) (bool, runtime.Object, error) {
		handled, obj, err := apply(a)
		if err != nil && a.(core.PatchActionImpl).GetPatchType() == types.JSONPatchType {
			if _, ok := err.(apierrors.APIStatus); !ok {
				err = apierrors.NewInvalid(NodesResource.GroupVersion().WithKind("Node").GroupKind(), a.(core.PatchActionImpl).GetName(), nil)
			}
		}
		return handled, obj, err
	})
}

// cache puts n into the informer's cache as the watch would deliver it.
func (f *fixture) cache(n *metav1.PartialObjectMetadata) {
	f.t.Helper()
	obj, err := f.c.trim(n.DeepCopy())
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.factory.ForResource(NodesResource).Informer().GetIndexer().Update(obj); err != nil {
		f.t.Fatal(err)
	}
}

// stored changes the API server's copy of a node (someone else's write).
func (f *fixture) stored(n *metav1.PartialObjectMetadata) {
	f.t.Helper()
	if err := f.client.Tracker().Update(NodesResource, n.DeepCopy(), ""); err != nil {
		f.t.Fatal(err)
	}
}

// syncBackfill and syncCleanup run one sync of name and return its error
// and the requests it sent, as "verb resource name".
func (f *fixture) syncBackfill(name string) ([]string, error) {
	f.client.ClearActions()
	err := f.c.syncBackfill(f.t.Context(), name, 0)
	return f.actions(), err
}

func (f *fixture) syncCleanup(name string, requeues int) ([]string, error) {
	f.client.ClearActions()
	err := f.c.syncCleanup(f.t.Context(), name, requeues)
	return f.actions(), err
}

func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if n, ok := a.(interface{ GetName() string }); ok && n.GetName() != "" {
			s += " " + n.GetName()
		}
		out = append(out, s)
	}
	return out
}

// expect fails unless a sync returned no error and sent exactly want.
func (f *fixture) expect(got []string, err error, want ...string) {
	f.t.Helper()
	if err != nil {
		f.t.Errorf("sync: %v", err)
	}
	if !slices.Equal(got, want) {
		f.t.Errorf("requests %q, want %q", got, want)
	}
}

// node is the API server's copy of name, nil when it is gone.
func (f *fixture) node(name string) *metav1.PartialObjectMetadata {
	m, err := f.client.Resource(NodesResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return m
}

// finalizers is the API server's finalizer list of name.
func (f *fixture) finalizers(name string) []string {
	f.t.Helper()
	n := f.node(name)
	if n == nil {
		f.t.Fatalf("node %s gone", name)
	}
	return n.Finalizers
}

// expectEvents fails unless the Events recorded since the last call have
// exactly the reasons want, in order.
func (f *fixture) expectEvents(want ...string) []string {
	f.t.Helper()
	var got, reasons []string
	for len(f.events.Events) > 0 {
		e := <-f.events.Events
		got = append(got, e)
		reasons = append(reasons, strings.Fields(e)[1])
	}
	if !slices.Equal(reasons, want) {
		f.t.Errorf("events %q, want reasons %q", got, want)
	}
	return got
}

// count is node_cleanup_nodes_total{result}.
func (f *fixture) count(result string) float64 {
	return testutil.ToFloat64(f.c.nodes.WithLabelValues(result))
}

// gauge is the value of the gauge name on the controller's registry.
func (f *fixture) gauge(name string) float64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	f.t.Fatalf("no metric %s", name)
	return 0
}

// nodeOpt edits a node fixture.
type nodeOpt func(*metav1.PartialObjectMetadata)

// meta is a Node's metadata with a UID of its own: two calls with the same
// name are two incarnations of that name.
func meta(name string, opts ...nodeOpt) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID(), ResourceVersion: "1"},
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

func finalizers(f ...string) nodeOpt {
	return func(m *metav1.PartialObjectMetadata) { m.Finalizers = f }
}

// deletedAgo gives the node a deletionTimestamp d ago.
func deletedAgo(d time.Duration) nodeOpt {
	return func(m *metav1.PartialObjectMetadata) {
		ts := metav1.NewTime(time.Now().Add(-d))
		m.DeletionTimestamp = &ts
	}
}

func annotated(k, v string) nodeOpt {
	return func(m *metav1.PartialObjectMetadata) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[k] = v
	}
}

// recreated is n deleted and created again under its name: another UID.
func recreated(n *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	again := n.DeepCopy()
	again.UID = uuid.NewUUID()
	again.DeletionTimestamp = nil
	return again
}

// plugin is a cleanup plugin that answers err and records the nodes it was
// called for.
type plugin struct {
	name string
	err  error
	// during, when set, runs inside Cleanup (the world changing while the
	// plugins run); Cleanup then waits for ctx to end.
	during func()

	mu    sync.Mutex
	nodes []types.UID
}

func (p *plugin) Name() string                { return p.name }
func (p *plugin) ShouldRun(*corev1.Node) bool { return true }
func (p *plugin) Cleanup(ctx context.Context, n *corev1.Node) error {
	p.mu.Lock()
	p.nodes = append(p.nodes, n.UID)
	p.mu.Unlock()
	if p.during != nil {
		p.during()
		<-ctx.Done()
		return ctx.Err()
	}
	return p.err
}

func (p *plugin) calls() []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.nodes)
}

// pipelineOf runs plugins, each critical unless named in optional.
func pipelineOf(plugins []*plugin, optional ...string) *cleanup.Pipeline {
	var stages []cleanup.Stage
	for _, p := range plugins {
		stages = append(stages, cleanup.Stage{Plugin: p, Spec: cleanup.Spec{
			Enabled: true, Critical: !slices.Contains(optional, p.name), Timeout: 5 * time.Second,
		}})
	}
	return cleanup.NewPipeline(stages, false, nil, slog.New(slog.DiscardHandler))
}
