package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
)

// fakeCluster is an in-memory API server for the agent's unit tests: Nodes
// (patched as the API server patches them, with resourceVersions and watch
// events), one Lease, and empty pods and DaemonSets. Tests reach into it
// under mu.
type fakeCluster struct {
	mu       sync.Mutex
	nodes    map[string]*corev1.Node
	rv       int
	watchers []*watch.RaceFreeFakeWatcher
	lease    *coordinationv1.Lease
	// patches records every accepted JSON patch of a node.
	patches []string
	// statusPatches counts accepted status patches.
	statusPatches int
	// patchHooks run before the next node patches, one each, with mu held;
	// an error answers the patch instead of applying it.
	patchHooks []func(f *fakeCluster) error
	// readyErr is what /readyz answers.
	readyErr error
	// closes counts DropStalledConnections calls.
	closes int
	// silent stops watch events, as a watch that lags or has expired.
	silent bool
	// daemonSets are what the DaemonSet gate lists; no pods run anywhere.
	daemonSets []appsv1.DaemonSet
	// dsWatches are the DaemonSet watches opened.
	dsWatches []*watch.RaceFreeFakeWatcher
}

func newFakeCluster(nodes ...*corev1.Node) *fakeCluster {
	f := &fakeCluster{nodes: map[string]*corev1.Node{}}
	for _, n := range nodes {
		f.rv++
		n = n.DeepCopy()
		n.ResourceVersion = strconv.Itoa(f.rv)
		f.nodes[n.Name] = n
	}
	return f
}

func (f *fakeCluster) node(name string) *corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[name].DeepCopy()
}

// store saves n as a new version and tells the watchers; f.mu is held.
func (f *fakeCluster) store(n *corev1.Node) *corev1.Node {
	f.rv++
	n.ResourceVersion = strconv.Itoa(f.rv)
	f.nodes[n.Name] = n
	if !f.silent {
		for _, w := range f.watchers {
			w.Modify(n.DeepCopy())
		}
	}
	return n.DeepCopy()
}

func (f *fakeCluster) ListNodes(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sel, err := labels.Parse(o.LabelSelector)
	if err != nil {
		return nil, err
	}
	name := strings.TrimPrefix(o.FieldSelector, "metadata.name=")
	l := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(f.rv)}}
	for _, n := range f.nodes {
		if (o.FieldSelector == "" || n.Name == name) && sel.Matches(labels.Set(n.Labels)) {
			l.Items = append(l.Items, *n.DeepCopy())
		}
	}
	if o.Limit > 0 && int64(len(l.Items)) > o.Limit {
		rest := int64(len(l.Items)) - o.Limit
		l.Items = l.Items[:o.Limit]
		l.RemainingItemCount = &rest
	}
	return l, nil
}

func (f *fakeCluster) WatchNodes(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := watch.NewRaceFreeFake()
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		// client-go's streaming list: the current objects, then a bookmark.
		name := strings.TrimPrefix(o.FieldSelector, "metadata.name=")
		for _, n := range f.nodes {
			if o.FieldSelector == "" || n.Name == name {
				w.Add(n.DeepCopy())
			}
		}
		w.Action(watch.Bookmark, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.Itoa(f.rv), Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}})
	}
	f.watchers = append(f.watchers, w)
	return w, nil
}

func (f *fakeCluster) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return n.DeepCopy(), nil
}

func (f *fakeCluster) PatchNode(_ context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.patchHooks) > 0 {
		hook := f.patchHooks[0]
		f.patchHooks = f.patchHooks[1:]
		if err := hook(f); err != nil {
			return nil, err
		}
	}
	n, ok := f.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	if pt != types.JSONPatchType {
		return nil, fmt.Errorf("fake: node patch type %s", pt)
	}
	orig, _ := json.Marshal(n)
	p, err := jsonpatch.DecodePatch(data)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	out, err := p.Apply(orig)
	if err != nil {
		// A failed test op: the API server answers 422.
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, name, nil)
	}
	var updated corev1.Node
	if err := json.Unmarshal(out, &updated); err != nil {
		return nil, err
	}
	f.patches = append(f.patches, string(data))
	return f.store(&updated), nil
}

func (f *fakeCluster) PatchNodeStatus(_ context.Context, name string, _ types.PatchType, data []byte, _ metav1.PatchOptions) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	orig, _ := json.Marshal(n)
	out, err := strategicpatch.StrategicMergePatch(orig, data, corev1.Node{})
	if err != nil {
		return nil, err
	}
	var updated corev1.Node
	if err := json.Unmarshal(out, &updated); err != nil {
		return nil, err
	}
	f.statusPatches++
	return f.store(&updated), nil
}

func (f *fakeCluster) GetLease(_ context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, name)
	}
	return f.lease.DeepCopy(), nil
}

func (f *fakeCluster) CreateLease(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease != nil {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "leases"}, l.Name)
	}
	f.lease = l.DeepCopy()
	f.lease.ResourceVersion = "1"
	return f.lease.DeepCopy(), nil
}

func (f *fakeCluster) UpdateLease(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease == nil || f.lease.ResourceVersion != l.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, l.Name, nil)
	}
	rv, _ := strconv.Atoi(l.ResourceVersion)
	f.lease = l.DeepCopy()
	f.lease.ResourceVersion = strconv.Itoa(rv + 1)
	return f.lease.DeepCopy(), nil
}

func (f *fakeCluster) ServerVersion(context.Context) (*version.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &version.Info{GitVersion: "v1.36.3"}, f.readyErr
}

func (f *fakeCluster) Readyz(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readyErr
}

func (f *fakeCluster) DropStalledConnections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes++
	return 0
}

func (f *fakeCluster) ListPods(context.Context, metav1.ListOptions) (*corev1.PodList, error) {
	return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
}

func (f *fakeCluster) WatchPods(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewRaceFreeFake()
	initialEvents(w, o, "1", &corev1.Pod{})
	return w, nil
}

// initialEvents sends, for client-go's streaming list, the bookmark that
// ends the (here empty, or given) initial objects.
func initialEvents(w *watch.RaceFreeFakeWatcher, o metav1.ListOptions, rv string, bookmark runtime.Object, objs ...runtime.Object) {
	if o.SendInitialEvents == nil || !*o.SendInitialEvents {
		return
	}
	for _, obj := range objs {
		w.Add(obj)
	}
	m, _ := meta.Accessor(bookmark)
	m.SetResourceVersion(rv)
	m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	w.Action(watch.Bookmark, bookmark)
}

func (f *fakeCluster) ListDaemonSets(context.Context, metav1.ListOptions) (*appsv1.DaemonSetList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &appsv1.DaemonSetList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: f.daemonSets}, nil
}

func (f *fakeCluster) WatchDaemonSets(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := watch.NewRaceFreeFake()
	var objs []runtime.Object
	for i := range f.daemonSets {
		objs = append(objs, f.daemonSets[i].DeepCopy())
	}
	initialEvents(w, o, "1", &appsv1.DaemonSet{}, objs...)
	f.dsWatches = append(f.dsWatches, w)
	return w, nil
}

// openDaemonSetWatches counts the DaemonSet watches not stopped.
func (f *fakeCluster) openDaemonSetWatches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.dsWatches {
		if !w.IsStopped() {
			n++
		}
	}
	return n
}

// remove deletes the node and tells the watchers.
func (f *fakeCluster) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[name]
	delete(f.nodes, name)
	f.rv++
	for _, w := range f.watchers {
		w.Delete(n.DeepCopy())
	}
}

// update changes the stored node with edit as another client would.
func (f *fakeCluster) update(name string, edit func(*corev1.Node)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[name].DeepCopy()
	edit(n)
	f.store(n)
}

// fakeRecorder keeps the Events the agent records.
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
