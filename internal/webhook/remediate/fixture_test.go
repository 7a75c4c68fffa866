package remediate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/budget"
)

// fixture is a remediation controller against client-go's fakes, in
// sample-controller's style: the objects the API server holds, the nodes in
// the controller's cache, and the requests the controller is expected to
// send.
type fixture struct {
	t      *testing.T
	client *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	c      *Controller
	events *events.FakeRecorder
	// clock is the controller's.
	clock *clocktesting.FakeClock
	// probeErr is what the API server health probe answers.
	probeErr error
}

// newFixture serves nodes and claims (Karpenter NodeClaims) from the fakes to
// a controller with testController's configuration and policy, whose view of
// the cluster began long ago (so each node is dated by its creation, see
// watched).
func newFixture(t *testing.T, policy Policy, nodes []*corev1.Node, claims ...*unstructured.Unstructured) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(t0), events: events.NewFakeRecorder(100)}
	var objs []runtime.Object
	for i, n := range nodes {
		n = n.DeepCopy()
		n.ResourceVersion = strconv.Itoa(i + 1)
		objs = append(objs, n)
	}
	f.client = fake.NewClientset(objs...)
	f.bumpResourceVersions()
	var dobjs []runtime.Object
	for _, cl := range claims {
		dobjs = append(dobjs, cl.DeepCopy())
	}
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{NodeClaims: "NodeClaimList"}, dobjs...)
	cfg := testController(t, policy, "1", "10%", false).cfg
	cfg.Recorder, cfg.Clock = f.events, f.clock
	c, err := New(f.client, f.dyn, cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c.probe = func(context.Context) error { return f.probeErr }
	c.obs, c.brks = newObserver(c, t0.Add(-1000*time.Hour)), newBreakers(Breaker{})
	c.obs.contact = t0 // the API server answered the last scan
	f.c = c
	return f
}

// bumpResourceVersions gives a node a new resourceVersion on every patch,
// as the API server does (the fake's tracker keeps the one it was given),
// so a test sees which read guards which write.
func (f *fixture) bumpResourceVersions() {
	apply := core.ObjectReaction(f.client.Tracker())
	rv := 1000
	f.client.PrependReactor("patch", "nodes", func(a core.Action) (bool, runtime.Object, error) {
		handled, obj, err := apply(a)
		n, ok := obj.(*corev1.Node)
		if err != nil || !ok {
			return handled, obj, err
		}
		rv++
		n.ResourceVersion = strconv.Itoa(rv)
		return true, n, f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, "")
	})
}

// cached returns what the informer holds: the API server's nodes of those
// names, as they are now, each observed at its creation.
func (f *fixture) cached(names ...string) []*corev1.Node {
	f.t.Helper()
	var out []*corev1.Node
	for _, name := range names {
		n, err := f.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", name)
		if err != nil {
			f.t.Fatalf("cache node %s: %v", name, err)
		}
		out = append(out, n.(*corev1.Node).DeepCopy())
	}
	return watched(f.c, out...)
}

// scan runs one scan at f.clock.Now() over cached and returns the requests it sent.
func (f *fixture) scan(cached ...*corev1.Node) []string {
	f.t.Helper()
	f.client.ClearActions()
	f.dyn.ClearActions()
	f.c.scan(f.t.Context(), cached)
	return f.actions()
}

// actions names each request of the last scan as "verb resource [name]":
// the clientset's, in order, then the dynamic client's (NodeClaims), in
// order.
func (f *fixture) actions() []string {
	var out []string
	for _, a := range append(f.client.Actions(), f.dyn.Actions()...) {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if n, ok := a.(interface{ GetName() string }); ok && n.GetName() != "" {
			s += " " + n.GetName()
		}
		out = append(out, s)
	}
	return out
}

// expectActions fails unless the last scan sent exactly want, in order.
func (f *fixture) expectActions(got []string, want ...string) {
	f.t.Helper()
	if !slices.Equal(got, want) {
		f.t.Errorf("requests\n  %q\nwant\n  %q", got, want)
	}
}

// patches returns the patches the last scan sent to nodes; each must name
// the webhook as its field manager.
func (f *fixture) patches() []core.PatchActionImpl {
	var out []core.PatchActionImpl
	for _, a := range f.client.Actions() {
		if p, ok := a.(core.PatchActionImpl); ok && a.GetResource().Resource == "nodes" {
			if p.PatchOptions.FieldManager != api.FieldManagerWebhook {
				f.t.Errorf("patch of node %s with field manager %q, want %q", p.Name, p.PatchOptions.FieldManager, api.FieldManagerWebhook)
			}
			out = append(out, p)
		}
	}
	return out
}

// deletes returns the deletes the last scan sent (nodes and NodeClaims).
func (f *fixture) deletes() []core.DeleteActionImpl {
	var out []core.DeleteActionImpl
	for _, a := range append(f.client.Actions(), f.dyn.Actions()...) {
		if d, ok := a.(core.DeleteActionImpl); ok {
			out = append(out, d)
		}
	}
	return out
}

// markPatch decodes a mark patch: the UID and resourceVersion it is guarded
// by and the mark it writes.
func (f *fixture) markPatch(p core.PatchActionImpl) (uid types.UID, rv string, m Mark) {
	f.t.Helper()
	if p.GetPatchType() != types.MergePatchType {
		f.t.Fatalf("mark patch of type %s, want a merge patch", p.GetPatchType())
	}
	var body struct {
		Metadata struct {
			UID             types.UID         `json:"uid"`
			ResourceVersion string            `json:"resourceVersion"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
		f.t.Fatalf("mark patch %s: %v", p.GetPatch(), err)
	}
	if err := json.Unmarshal([]byte(body.Metadata.Annotations[f.c.cfg.ReplacingAnnotation]), &m); err != nil {
		f.t.Fatalf("mark in patch %s: %v", p.GetPatch(), err)
	}
	return body.Metadata.UID, body.Metadata.ResourceVersion, m
}

// node returns the API server's node name, nil when it is gone.
func (f *fixture) node(name string) *corev1.Node {
	f.t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return n
}

// recorded drains the Events recorded so far.
func (f *fixture) recorded() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// expectEvents fails unless the Events recorded since the last call have
// exactly the reasons want, in order.
func (f *fixture) expectEvents(want ...string) {
	f.t.Helper()
	var reasons []string
	got := f.recorded()
	for _, e := range got {
		reasons = append(reasons, strings.Fields(e)[1])
	}
	if !slices.Equal(reasons, want) {
		f.t.Errorf("events %q, want reasons %q", got, want)
	}
}

// count is the value of node_remediation_actions_total{action,result}.
func (f *fixture) count(action, result string) float64 {
	return testutil.ToFloat64(f.c.actions.WithLabelValues(action, result))
}

// claim is a Karpenter NodeClaim named name for a node, with a UID of its
// own; providerID and nodeName go into its status when not empty.
func claim(name, nodeName, providerID string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": NodeClaims.GroupVersion().String(), "kind": "NodeClaim",
		"metadata": map[string]any{"name": name, "uid": string(uuid.NewUUID())},
		"status":   map[string]any{"nodeName": nodeName, "providerID": providerID},
	}}
	return u
}

// ownedBy makes claim the node's owner, as Karpenter does.
func ownedBy(cl *unstructured.Unstructured) nodeOpt {
	return func(n *corev1.Node) {
		n.OwnerReferences = append(n.OwnerReferences, metav1.OwnerReference{
			APIVersion: NodeClaims.GroupVersion().String(), Kind: "NodeClaim", Name: cl.GetName(), UID: cl.GetUID(),
		})
	}
}

func providerID(id string) nodeOpt { return func(n *corev1.Node) { n.Spec.ProviderID = id } }

// fail makes the fakes answer verb on resource with err.
func fail(r interface {
	PrependReactor(verb, resource string, fn core.ReactionFunc)
}, verb, resource string, err error) {
	r.PrependReactor(verb, resource, func(core.Action) (bool, runtime.Object, error) { return true, nil, err })
}

var errBoom = fmt.Errorf("boom")

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

func mustBudget(t *testing.T, s string) budget.Budget {
	t.Helper()
	b, err := budget.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testutilScans(f *fixture, result string) float64 {
	return testutil.ToFloat64(f.c.scans.WithLabelValues(result))
}

func testutilCircuit(f *fixture) float64 { return testutil.ToFloat64(f.c.circuitOpen) }

func gauge(f *fixture, reason string) float64 {
	return testutil.ToFloat64(f.c.blocked.WithLabelValues(reason))
}
