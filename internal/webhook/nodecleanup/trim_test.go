package nodecleanup

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
)

const legacyFin = "example.com/old-cleanup"

// cloudMeta is the metadata of a cloud provider's Node as the metadata
// informer lists it (issue 35, R12): 61 labels, 9 annotations (kilobytes
// of them), managedFields, an owner reference.
func cloudMeta(name string, edit ...func(*metav1.ObjectMeta)) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: uuid.NewUUID(), ResourceVersion: "4711", CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)),
			Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "eu-west-1a",
				"node.kubernetes.io/instance-type": "m6i.2xlarge"},
			Annotations:     map[string]string{"csi.volume.kubernetes.io/nodeid": `{"ebs.csi.aws.com":"i-0123456789abcdef0"}`},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: name, UID: uuid.NewUUID()}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:kubernetes.io/hostname":{}}}}`)}},
		},
	}
	for i := 0; len(m.Labels) < 61; i++ {
		m.Labels[fmt.Sprintf("feature.node.kubernetes.io/cpu-cpuid.F%d", i)] = "true"
	}
	for i := 0; len(m.Annotations) < 9; i++ {
		m.Annotations[fmt.Sprintf("example.com/note-%d", i)] = fmt.Sprintf("%0512d", i)
	}
	for _, e := range edit {
		e(&m.ObjectMeta)
	}
	return m
}

// answers is every question back-fill, cleanup and the plugins ask of a
// cached node.
type answers struct {
	Name, UID, ResourceVersion string
	NeedsFinalizer, Carries    bool
	Skipped                    bool
	Legacy                     []string
	AddPatch, RemovePatch      string
	Deleting                   *metav1.Time
	// Plugins: what nodeOf hands them while the node is being deleted
	// (they are handed no other node).
	PluginNode *pluginView
}

type pluginView struct {
	Name, UID string
	Labels    map[string]string
	Created   time.Time
	Deleted   time.Time
}

func askAll(t *testing.T, c *Controller, m *metav1.PartialObjectMetadata) answers {
	t.Helper()
	add, err := AddFinalizerPatch(m.Finalizers, c.cfg.Finalizer, c.cfg.Legacy...)
	if err != nil {
		t.Fatal(err)
	}
	remove, err := RemoveFinalizerPatch(m.UID, m.Finalizers, c.owned()...)
	if err != nil {
		t.Fatal(err)
	}
	a := answers{
		Name: m.Name, UID: string(m.UID), ResourceVersion: m.ResourceVersion,
		NeedsFinalizer: NeedsFinalizer(m, c.cfg.Finalizer, c.cfg.Legacy...), Carries: c.carries(m), Skipped: c.skipped(m),
		Legacy: c.legacyOn(m), AddPatch: string(add), RemovePatch: string(remove), Deleting: m.DeletionTimestamp,
	}
	if m.DeletionTimestamp != nil {
		n := nodeOf(m)
		a.PluginNode = &pluginView{Name: n.Name, UID: string(n.UID), Labels: n.Labels, Created: n.CreationTimestamp.Time, Deleted: n.DeletionTimestamp.Time}
	}
	return a
}

// R12: the watcher's cache keeps of a Node only what is read, and a trimmed
// node answers every question of back-fill, cleanup and the plugins as the
// whole one does; a node not being deleted shrinks to a few hundred bytes.
// (The other tests of this package put trimmed nodes into the cache too:
// fixture.cache.)
func TestTrimmedNodeAnswersLikeTheWholeNode(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC))
	del := func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &now }
	fins := func(f ...string) func(*metav1.ObjectMeta) { return func(m *metav1.ObjectMeta) { m.Finalizers = f } }
	skip := func(v string) func(*metav1.ObjectMeta) {
		return func(m *metav1.ObjectMeta) { m.Annotations[skipAnnotation] = v }
	}
	nodes := map[string]*metav1.PartialObjectMetadata{
		"new, no finalizer":               cloudMeta("a"),
		"someone else's finalizer":        cloudMeta("b", fins("example.com/other")),
		"ours":                            cloudMeta("c", fins("example.com/other", fin)),
		"a legacy name of ours":           cloudMeta("d", fins(legacyFin)),
		"skip annotation, not deleting":   cloudMeta("e", fins(fin), skip("true")),
		"being deleted, ours":             cloudMeta("f", fins(fin, "example.com/other"), del),
		"being deleted, skip annotation":  cloudMeta("g", fins(fin), skip("true"), del),
		"being deleted, skip set false":   cloudMeta("h", fins(legacyFin), skip("false"), del),
		"being deleted, not ours anymore": cloudMeta("i", fins("example.com/other"), del),
	}
	f := newFixture(t, func(c *Config) {
		c.Legacy = []string{legacyFin}
		c.KeepAnnotations = []string{api.StartupTaintAdmissionAnnotation}
	})
	for name, m := range nodes {
		t.Run(name, func(t *testing.T) {
			obj, err := f.c.trim(m.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			trimmed := obj.(*metav1.PartialObjectMetadata)
			if whole, cached := askAll(t, f.c, m), askAll(t, f.c, trimmed); !reflect.DeepEqual(whole, cached) {
				t.Errorf("the trimmed node answers\n%+v\nthe whole node\n%+v", cached, whole)
			}
			if trimmed.ManagedFields != nil || trimmed.OwnerReferences != nil || len(trimmed.Annotations) > 2 {
				t.Errorf("kept what nothing reads: %+v", trimmed.ObjectMeta)
			}
			if m.DeletionTimestamp == nil {
				raw, err := json.Marshal(trimmed)
				if err != nil {
					t.Fatal(err)
				}
				if len(trimmed.Labels) != 0 || len(raw) > 512 {
					t.Errorf("a node not being deleted keeps %d labels, %d bytes of JSON: %s", len(trimmed.Labels), len(raw), raw)
				}
			}
		})
	}
}

// The others that share the watcher's informer get what they read from it:
// the missed-node reporter of startup taint injection names the same nodes
// from trimmed ones as from whole ones.
func TestTrimKeepsWhatTheMissedReporterReads(t *testing.T) {
	at := func(day int) func(*metav1.ObjectMeta) {
		return func(m *metav1.ObjectMeta) {
			m.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, day, 0, 0, 0, 0, time.UTC))
		}
	}
	mark := func(m *metav1.ObjectMeta) { m.Annotations[api.StartupTaintAdmissionAnnotation] = "added" }
	whole := []*metav1.PartialObjectMetadata{
		cloudMeta("before-injection", at(1)), cloudMeta("first-marked", at(2), mark),
		cloudMeta("missed", at(3)), cloudMeta("marked", at(4), mark),
	}
	f := newFixture(t, func(c *Config) { c.KeepAnnotations = []string{api.StartupTaintAdmissionAnnotation} })
	var trimmed []*metav1.PartialObjectMetadata
	for _, m := range whole {
		obj, err := f.c.trim(m.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		trimmed = append(trimmed, obj.(*metav1.PartialObjectMetadata))
	}
	want := []string{"missed"}
	if got := startuptaint.Missed(whole); !reflect.DeepEqual(got, want) {
		t.Fatalf("whole nodes: missed %v, want %v", got, want)
	}
	if got := startuptaint.Missed(trimmed); !reflect.DeepEqual(got, want) {
		t.Errorf("trimmed nodes: missed %v, want %v", got, want)
	}
}
