package plugins

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// storageDeps are the plugins' dependencies on client with shared
// informers, stopped at the end of the test.
func storageDeps(t *testing.T, client *fake.Clientset) cleanup.Deps {
	t.Helper()
	inf := cleanup.NewInformers(client)
	t.Cleanup(inf.Stop)
	return cleanup.Deps{Client: client, Log: quiet, Informers: inf}
}

// requests are the client's requests since the last ClearActions, as
// "verb resource" (watches included), in order.
func requests(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

func count(reqs []string, want string) int {
	n := 0
	for _, r := range reqs {
		if r == want {
			n++
		}
	}
	return n
}

// deletePreconditions are the UID and resourceVersion preconditions of each
// delete of resource, by name.
func deletePreconditions(client *fake.Clientset, resource string) map[string]metav1.Preconditions {
	out := map[string]metav1.Preconditions{}
	for _, a := range client.Actions() {
		if d, ok := a.(core.DeleteActionImpl); ok && d.GetResource().Resource == resource {
			if p := d.GetDeleteOptions().Preconditions; p != nil {
				out[d.GetName()] = *p
			}
		}
	}
	return out
}

func attachment(name, node string, created time.Time) *storagev1.VolumeAttachment {
	pv := "pv-" + name
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID(), ResourceVersion: "1", CreationTimestamp: metav1.NewTime(created)},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "csi.example", NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
	}
}

// The volumeattachments plugin finds a node's attachments in the shared
// informer and sees them go there: for any number of deleted nodes the API
// server gets one list and one watch of volumeattachments, a GET of each
// node that has attachments (the fresh re-read) and a delete per
// attachment with its UID as precondition — no list per node, no list per
// poll. An attachment the attacher still holds (finalizer) is waited for,
// and the wait ends when the watch delivers its deletion, not at the next
// poll.
func TestVolumeAttachmentsReadTheCache(t *testing.T) {
	hourAgo := time.Now().Add(-time.Hour)
	var nodes []*corev1.Node
	objs := []runtime.Object{attachment("va-neighbour", "neighbour", hourAgo), hostNode("neighbour", "neighbour", false)}
	for i := range 5 {
		n := hostNode(fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", i), true)
		nodes = append(nodes, n)
		objs = append(objs, n, attachment(fmt.Sprintf("va-%d-a", i), n.Name, hourAgo), attachment(fmt.Sprintf("va-%d-b", i), n.Name, hourAgo),
			attachment(fmt.Sprintf("va-%d-new", i), n.Name, time.Now().Add(time.Hour))) // after the deletion: the replacement's
	}
	client := fake.NewClientset(objs...)
	// The attacher's finalizer: a delete only marks va-0-a; the test
	// removes it a little later, as the attacher does once detached.
	var detached atomic.Bool
	vaGVR := schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"}
	client.PrependReactor("delete", "volumeattachments", func(a core.Action) (bool, runtime.Object, error) {
		if a.(core.DeleteActionImpl).GetName() != "va-0-a" || detached.Load() {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(vaGVR, "", "va-0-a")
		if err != nil {
			return true, nil, err
		}
		va := obj.(*storagev1.VolumeAttachment).DeepCopy()
		va.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		va.ResourceVersion = "2"
		go func() {
			time.Sleep(300 * time.Millisecond)
			detached.Store(true)
			_ = client.Tracker().Delete(vaGVR, "", "va-0-a")
		}()
		return true, nil, client.Tracker().Update(vaGVR, va, "")
	})
	// An hour between polls: the watch's events must wake the wait.
	p, err := newVolumeAttachments(storageDeps(t, client), []byte(`{"pollInterval":"1h"}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := p.Cleanup(ctx, n); err != nil {
			t.Fatalf("cleanup of %s: %v", n.Name, err)
		}
	}
	if !detached.Load() {
		t.Error("the plugin returned before the attacher let va-0-a go")
	}
	reqs := requests(client)
	for req, want := range map[string]int{
		"list volumeattachments": 1, "watch volumeattachments": 1,
		"get nodes": len(nodes), "delete volumeattachments": 2 * len(nodes),
	} {
		if got := count(reqs, req); got != want {
			t.Errorf("%d × %q for %d deleted nodes, want %d (requests: %q)", got, req, len(nodes), want, reqs)
		}
	}
	if len(reqs) != 2+len(nodes)+2*len(nodes) {
		t.Errorf("requests %q, want nothing else", reqs)
	}
	left, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, va := range left.Items {
		names = append(names, va.Name)
	}
	slices.Sort(names)
	want := []string{"va-0-new", "va-1-new", "va-2-new", "va-3-new", "va-4-new", "va-neighbour"}
	if !slices.Equal(names, want) {
		t.Errorf("attachments left %v, want %v", names, want)
	}
	for name, pre := range deletePreconditions(client, "volumeattachments") {
		if pre.UID == nil || *pre.UID == "" {
			t.Errorf("delete of %s without a UID precondition", name)
		}
	}
}

// A Node re-created under the deleted one's name — seen by the fresh GET,
// not the cache — keeps its attachments.
func TestVolumeAttachmentsLeaveARecreatedNodeAlone(t *testing.T) {
	old := hostNode("n", "n", true)
	again := hostNode("n", "n", false) // same name, another UID, in the API server
	client := fake.NewClientset(again, attachment("va", "n", time.Now().Add(-time.Hour)))
	p, err := newVolumeAttachments(storageDeps(t, client), []byte(`{"pollInterval":"50ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cleanup(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if n := count(requests(client), "delete volumeattachments"); n != 0 {
		t.Errorf("%d deletes of the re-created node's attachments, want 0", n)
	}
}

// storedPV is pv as the API server would hold it: a resourceVersion, a claim.
func storedPV(name, host string, rv string) *corev1.PersistentVolume {
	pv := localPV(name, hostnameTerm(host))
	pv.ResourceVersion = rv
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "apps", Name: "data-" + name, UID: uuid.NewUUID()}
	return pv
}

var pvGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}

// The local-volumes plugin scans the shared PersistentVolume and
// StorageClass informers: for any number of deleted nodes, one list and one
// watch of each; per node with volumes the fresh reads of the gates (a GET
// of the node, a list of the Nodes carrying its hostname, by label), and each
// volume deleted with UID and resourceVersion preconditions after its
// claim (UID precondition). A class opts in by its annotation, seen in the
// cache.
func TestLocalVolumesReadTheCache(t *testing.T) {
	objs := []runtime.Object{
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local", Annotations: map[string]string{LocalVolumesAnnotation: "true"}}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	}
	var nodes []*corev1.Node
	for i := range 4 {
		n := hostNode(fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", i), true)
		nodes = append(nodes, n)
		notOpted := storedPV(fmt.Sprintf("pv-%d-other", i), n.Name, "1")
		notOpted.Spec.StorageClassName = "other"
		objs = append(objs, n, storedPV(fmt.Sprintf("pv-%d", i), n.Name, "7"), notOpted)
	}
	client := fake.NewClientset(objs...)
	p, err := newLocalVolumes(storageDeps(t, client), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := p.Cleanup(t.Context(), n); err != nil {
			t.Fatalf("cleanup of %s: %v", n.Name, err)
		}
	}
	reqs := requests(client)
	for req, want := range map[string]int{
		"list persistentvolumes": 1, "watch persistentvolumes": 1, "list storageclasses": 1, "watch storageclasses": 1,
		"get nodes": len(nodes), "list nodes": len(nodes), "delete persistentvolumeclaims": len(nodes), "delete persistentvolumes": len(nodes),
	} {
		if got := count(reqs, req); got != want {
			t.Errorf("%d × %q for %d deleted nodes, want %d (requests: %q)", got, req, len(nodes), want, reqs)
		}
	}
	if len(reqs) != 4+4*len(nodes) {
		t.Errorf("requests %q, want nothing else", reqs)
	}
	for name, pre := range deletePreconditions(client, "persistentvolumes") {
		if pre.UID == nil || pre.ResourceVersion == nil || *pre.ResourceVersion != "7" {
			t.Errorf("delete of %s with preconditions %+v, want its UID and resourceVersion 7", name, pre)
		}
	}
	for name, pre := range deletePreconditions(client, "persistentvolumeclaims") {
		if pre.UID == nil || *pre.UID == "" {
			t.Errorf("delete of claim %s without a UID precondition", name)
		}
	}
}

// A volume that changed after the cache showed it (the delete's
// resourceVersion precondition fails) is judged again on the version the
// watch brings: still this node's alone, it is deleted with the new
// resourceVersion; re-pinned to another node, it is left alone.
func TestLocalVolumesJudgeAChangedVolumeAgain(t *testing.T) {
	for _, tt := range []struct {
		name     string
		change   func(*corev1.PersistentVolume)
		wantGone bool
	}{
		{"marked Released: deleted", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased }, true},
		{"re-pinned to another node: left alone", func(pv *corev1.PersistentVolume) {
			pv.Spec.NodeAffinity.Required.NodeSelectorTerms = []corev1.NodeSelectorTerm{hostnameTerm("elsewhere")}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := hostNode("n", "n", true)
			client := fake.NewClientset(n, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}}, storedPV("pv", "n", "1"))
			var changed atomic.Bool
			client.PrependReactor("delete", "persistentvolumes", func(a core.Action) (bool, runtime.Object, error) {
				pre := a.(core.DeleteActionImpl).GetDeleteOptions().Preconditions
				obj, err := client.Tracker().Get(pvGVR, "", "pv")
				if err != nil {
					return true, nil, err
				}
				cur := obj.(*corev1.PersistentVolume)
				if !changed.Swap(true) { // someone else's write lands first
					next := cur.DeepCopy()
					tt.change(next)
					next.ResourceVersion = "2"
					if err := client.Tracker().Update(pvGVR, next, ""); err != nil {
						return true, nil, err
					}
					cur = next
				}
				if pre == nil || pre.ResourceVersion == nil || *pre.ResourceVersion != cur.ResourceVersion || *pre.UID != cur.UID {
					return true, nil, apierrors.NewConflict(pvGVR.GroupResource(), "pv", fmt.Errorf("precondition failed"))
				}
				return false, nil, nil
			})
			p, err := newLocalVolumes(storageDeps(t, client), []byte(`{"storageClasses":["local"]}`))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Cleanup(t.Context(), n); err != nil {
				t.Fatalf("Cleanup = %v, want nil", err)
			}
			_, err = client.Tracker().Get(pvGVR, "", "pv")
			if gone := apierrors.IsNotFound(err); gone != tt.wantGone {
				t.Errorf("volume gone = %v, want %v", gone, tt.wantGone)
			}
			deletes := 0
			for _, a := range client.Actions() {
				if d, ok := a.(core.DeleteActionImpl); ok && d.GetResource().Resource == "persistentvolumes" {
					deletes++
					if pre := d.GetDeleteOptions().Preconditions; deletes == 2 && (pre.ResourceVersion == nil || *pre.ResourceVersion != "2") {
						t.Errorf("second delete with preconditions %+v, want the new resourceVersion 2", pre)
					}
				}
			}
			if want := map[bool]int{true: 2, false: 1}[tt.wantGone]; deletes != want {
				t.Errorf("%d deletes of the volume, want %d", deletes, want)
			}
		})
	}
}
