package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	core "k8s.io/client-go/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// cluster is the API server of the agent's unit tests: client-go's fake
// clientset, with reactors for what the agent relies on and the fake does
// not do as the API server does: every stored object has a resourceVersion
// that every write moves on; an update carrying another resourceVersion
// than the stored one conflicts (409); a JSON patch whose test op fails is
// refused with 422; lists and watches honour a metadata.name field
// selector, and a watch streams its first list (client-go's watch-list:
// the objects, then a bookmark). It is also the agent's Server (/readyz,
// /version, its connections).
type cluster struct {
	*fake.Clientset
	t *testing.T

	// mu serializes the writes (each takes a resourceVersion and stores
	// under it); hooks and the fields below it are under it too.
	mu sync.Mutex
	// patches records every accepted JSON patch of a node.
	patches []string
	// statusPatches counts accepted status patches.
	statusPatches int
	// patchHooks run before the next JSON patches of a node, one each, with
	// mu held; an error answers the patch instead of applying it.
	patchHooks []func(c *cluster) error
	// readyErr is what /readyz and /version answer.
	readyErr error
	// closes counts DropStalledConnections calls.
	closes int
	// watchers are the watches opened, by resource.
	watchers map[string][]*watch.RaceFreeFakeWatcher

	// silent drops every watch event, as a watch that lags or has expired.
	silent atomic.Bool
}

// newCluster serves objs (nodes, Leases, DaemonSets...) from a fake clientset.
func newCluster(t *testing.T, objs ...runtime.Object) *cluster {
	t.Helper()
	c := &cluster{Clientset: fake.NewClientset(), t: t, watchers: map[string][]*watch.RaceFreeFakeWatcher{}}
	for _, o := range objs {
		c.add(o)
	}
	c.PrependReactor("create", "*", c.write)
	c.PrependReactor("update", "*", c.write)
	c.PrependReactor("patch", "*", c.patch)
	c.PrependReactor("list", "*", c.list)
	c.PrependWatchReactor("*", c.watch)
	return c
}

// newFakeCluster serves nodes.
func newFakeCluster(t *testing.T, nodes ...*corev1.Node) *cluster {
	t.Helper()
	objs := make([]runtime.Object, len(nodes))
	for i, n := range nodes {
		objs[i] = n
	}
	return newCluster(t, objs...)
}

// client is the agent's Client on c.
func (c *cluster) client() Client { return Client{Kube: c.Clientset, Server: c} }

// resource names obj's resource as the tracker files it.
func resource(obj runtime.Object) schema.GroupVersionResource {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		panic(err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
	return gvr
}

// kindOf is the kind the tracker lists for gvr.
func kindOf(gvr schema.GroupVersionResource) schema.GroupVersionKind {
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if r, _ := meta.UnsafeGuessKindToResource(gvk); r == gvr {
			return gvk
		}
	}
	panic("no kind for " + gvr.String())
}

// listVersion is the tracker's resourceVersion of gvr's list: that of its
// last write.
func (c *cluster) listVersion(gvr schema.GroupVersionResource) string {
	l, err := c.Tracker().List(gvr, kindOf(gvr), "")
	if err != nil {
		panic(err)
	}
	lm, _ := meta.ListAccessor(l)
	return lm.GetResourceVersion()
}

// stamp gives obj the resourceVersion its next write stores it under: the
// tracker's own, so that a watch resumed from an object's version misses
// nothing; c.mu is held.
func (c *cluster) stamp(obj runtime.Object) {
	gvr := resource(obj)
	rv, _ := strconv.Atoi(c.listVersion(gvr))
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.Itoa(rv + 1))
}

// add stores obj as another client would create it.
func (c *cluster) add(obj runtime.Object) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	obj = obj.DeepCopyObject()
	c.stamp(obj)
	if err := c.Tracker().Add(obj); err != nil {
		c.t.Fatal(err)
	}
}

// write is the API server's create and update: a new resourceVersion, and
// an update's own as its precondition.
func (c *cluster) write(a core.Action) (bool, runtime.Object, error) {
	obj := a.(interface{ GetObject() runtime.Object }).GetObject().DeepCopyObject()
	m, _ := meta.Accessor(obj)
	c.mu.Lock()
	defer c.mu.Unlock()
	gvr, ns := a.GetResource(), a.GetNamespace()
	if a.GetVerb() == "update" {
		stored, err := c.Tracker().Get(gvr, ns, m.GetName())
		if err != nil {
			return true, nil, err
		}
		if sm, _ := meta.Accessor(stored); m.GetResourceVersion() != "" && m.GetResourceVersion() != sm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), m.GetName(), fmt.Errorf("resourceVersion %s, stored %s", m.GetResourceVersion(), sm.GetResourceVersion()))
		}
	}
	c.stamp(obj)
	var err error
	if a.GetVerb() == "create" {
		err = c.Tracker().Create(gvr, obj, ns)
	} else {
		err = c.Tracker().Update(gvr, obj, ns)
	}
	if err != nil {
		return true, nil, err
	}
	return true, obj.DeepCopyObject(), nil
}

// patch is the API server's patch of nodes (JSON, strategic merge on
// status) and Leases: hooks first, then the patch on the stored object, a
// failed test op refused with 422, and a new resourceVersion.
func (c *cluster) patch(a core.Action) (bool, runtime.Object, error) {
	p := a.(core.PatchActionImpl)
	c.mu.Lock()
	defer c.mu.Unlock()
	node := p.GetResource().Resource == "nodes"
	if node && p.GetSubresource() == "" && len(c.patchHooks) > 0 {
		hook := c.patchHooks[0]
		c.patchHooks = c.patchHooks[1:]
		if err := hook(c); err != nil {
			return true, nil, err
		}
	}
	stored, err := c.Tracker().Get(p.GetResource(), p.GetNamespace(), p.GetName())
	if err != nil {
		return true, nil, err
	}
	orig, _ := json.Marshal(stored)
	var out []byte
	switch p.GetPatchType() {
	case types.JSONPatchType:
		jp, err := jsonpatch.DecodePatch(p.GetPatch())
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		if out, err = jp.Apply(orig); err != nil {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: reflect.TypeOf(stored).Elem().Name()}, p.GetName(), nil)
		}
	case types.StrategicMergePatchType:
		if out, err = strategicpatch.StrategicMergePatch(orig, p.GetPatch(), stored); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
	default:
		return true, nil, fmt.Errorf("cluster: patch type %s", p.GetPatchType())
	}
	updated := reflect.New(reflect.TypeOf(stored).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(out, updated); err != nil {
		return true, nil, err
	}
	c.stamp(updated)
	if err := c.Tracker().Update(p.GetResource(), updated, p.GetNamespace()); err != nil {
		return true, nil, err
	}
	switch {
	case node && p.GetSubresource() == "status":
		c.statusPatches++
	case node && p.GetPatchType() == types.JSONPatchType:
		c.patches = append(c.patches, string(p.GetPatch()))
	}
	return true, updated.DeepCopyObject(), nil
}

// selected says whether obj passes a field selector on its name and namespace.
func selected(sel string, obj runtime.Object) bool {
	if sel == "" {
		return true
	}
	s, err := fields.ParseSelector(sel)
	if err != nil {
		panic(err)
	}
	m, _ := meta.Accessor(obj)
	return s.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()})
}

// list is the fake's list, field-selected; the fake selects by label after.
func (c *cluster) list(a core.Action) (bool, runtime.Object, error) {
	l := a.(core.ListActionImpl)
	if l.ListOptions.FieldSelector == "" {
		return false, nil, nil
	}
	obj, err := c.Tracker().List(l.GetResource(), l.GetKind(), l.GetNamespace())
	if err != nil {
		return true, nil, err
	}
	items, _ := meta.ExtractList(obj)
	var kept []runtime.Object
	for _, it := range items {
		if selected(l.ListOptions.FieldSelector, it) {
			kept = append(kept, it)
		}
	}
	return true, obj, meta.SetList(obj, kept)
}

// watch is the tracker's watch, field-selected, streaming its first list
// when asked to (the objects, then the bookmark that ends them), and
// silent while c.silent is set.
func (c *cluster) watch(a core.Action) (bool, watch.Interface, error) {
	w := a.(core.WatchActionImpl)
	o := w.ListOptions
	stream := o.SendInitialEvents != nil && *o.SendInitialEvents
	if stream {
		o.ResourceVersion = "" // every stored object, as an Add
	}
	gvr := w.GetResource()
	tw, err := c.Tracker().Watch(gvr, w.GetNamespace(), o)
	if err != nil {
		return true, nil, err
	}
	raw := tw.(*watch.RaceFreeFakeWatcher)
	if stream {
		bookmark, _ := scheme.Scheme.New(kindOf(gvr))
		m, _ := meta.Accessor(bookmark)
		m.SetResourceVersion(c.listVersion(gvr))
		m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		raw.Action(watch.Bookmark, bookmark)
	}
	c.mu.Lock()
	c.watchers[gvr.Resource] = append(c.watchers[gvr.Resource], raw)
	c.mu.Unlock()
	fw := &filtered{in: raw, out: make(chan watch.Event), done: make(chan struct{})}
	go fw.loop(func(e watch.Event) bool {
		return e.Type == watch.Bookmark || (!c.silent.Load() && selected(o.FieldSelector, e.Object))
	})
	return true, fw, nil
}

// filtered passes on the events of in that keep says to. Unlike
// watch.Filter's, its goroutine ends on Stop even while an event waits.
type filtered struct {
	in   *watch.RaceFreeFakeWatcher
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

func (w *filtered) ResultChan() <-chan watch.Event { return w.out }

func (w *filtered) Stop() {
	w.once.Do(func() {
		close(w.done)
		w.in.Stop()
	})
}

func (w *filtered) loop(keep func(watch.Event) bool) {
	defer close(w.out)
	for {
		select {
		case e, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			if !keep(e) {
				continue
			}
			select {
			case w.out <- e:
			case <-w.done:
				return
			}
		case <-w.done:
			return
		}
	}
}

// requests counts the requests sent to resource, of verbs (any when none).
func (c *cluster) requests(resource string, verbs ...string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetResource().Resource == resource && (len(verbs) == 0 || slices.Contains(verbs, a.GetVerb())) {
			n++
		}
	}
	return n
}

// openWatches counts the watches of resource not stopped.
func (c *cluster) openWatches(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.watchers[resource] {
		if !w.IsStopped() {
			n++
		}
	}
	return n
}

// node returns the stored node, once the write in progress (if any) is
// recorded.
func (c *cluster) node(name string) *corev1.Node {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stored(name)
}

// stored returns the stored node; c.mu is held.
func (c *cluster) stored(name string) *corev1.Node {
	c.t.Helper()
	obj, err := c.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", name)
	if err != nil {
		c.t.Fatalf("node %s: %v", name, err)
	}
	return obj.(*corev1.Node).DeepCopy()
}

// change edits the stored node as another client would; c.mu is held.
func (c *cluster) change(name string, edit func(*corev1.Node)) {
	n := c.stored(name)
	edit(n)
	c.put(n)
}

// put stores n (new or not) as another client would; c.mu is held.
func (c *cluster) put(n *corev1.Node) {
	n = n.DeepCopy()
	c.stamp(n)
	gvr := corev1.SchemeGroupVersion.WithResource("nodes")
	err := c.Tracker().Update(gvr, n, "")
	if apierrors.IsNotFound(err) {
		err = c.Tracker().Create(gvr, n, "")
	}
	if err != nil {
		c.t.Error(err)
	}
}

// update changes the stored node with edit as another client would.
func (c *cluster) update(name string, edit func(*corev1.Node)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.change(name, edit)
}

// remove deletes the node.
func (c *cluster) remove(name string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("nodes"), "", name); err != nil {
		c.t.Fatal(err)
	}
}

// lease returns the re-taint Lease, nil when there is none.
func (c *cluster) lease() *coordinationv1.Lease {
	obj, err := c.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), "kube-node-ready", api.RetaintLease)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return obj.(*coordinationv1.Lease)
}

// Readyz answers readyErr.
func (c *cluster) Readyz(_ context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readyErr
}

// ServerVersion answers readyErr.
func (c *cluster) ServerVersion(context.Context) (*version.Info, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &version.Info{GitVersion: "v1.36.3"}, c.readyErr
}

// DropStalledConnections counts its calls.
func (c *cluster) DropStalledConnections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closes++
	return 0
}

// fakeRecorder keeps the reasons of the Events the agent records.
type fakeRecorder struct {
	mu      sync.Mutex
	reasons []string
}

func (r *fakeRecorder) Eventf(_ corev1.ObjectReference, _, reason, _, _ string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *fakeRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}
