package cleanup

import (
	"context"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// Each resource is watched once per process, however many plugins and
// pipelines (configuration reloads) ask for it; the cache holds no
// managedFields; a resource nobody asks for is never listed.
func TestInformersStartOncePerResource(t *testing.T) {
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
		Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1"}}
	client := kubefake.NewClientset(va)
	inf := NewInformers(client)
	defer inf.Stop()
	first, err := inf.VolumeAttachments()
	if err != nil {
		t.Fatal(err)
	}
	second, err := inf.VolumeAttachments() // a reloaded configuration's plugin
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Error("a second plugin got a second VolumeAttachment informer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := WaitSynced(ctx, "test", first); err != nil {
		t.Fatal(err)
	}
	objs, err := first.GetIndexer().ByIndex(VolumeAttachmentsByNode, "n1")
	if err != nil || len(objs) != 1 {
		t.Fatalf("by node n1: %v, %v; want the one attachment", objs, err)
	}
	if got := objs[0].(*storagev1.VolumeAttachment); len(got.ManagedFields) != 0 {
		t.Errorf("managedFields kept in the cache: %v", got.ManagedFields)
	}
	lists := map[string]int{}
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			lists[a.GetVerb()+" "+a.GetResource().Resource]++
		}
	}
	if lists["list volumeattachments"] != 1 || lists["watch volumeattachments"] != 1 || len(lists) != 2 {
		t.Errorf("requests %v, want one list and one watch of volumeattachments, nothing else", lists)
	}
	inf.Stop()
	inf.Stop() // idempotent
	if _, err := inf.PersistentVolumes(); err == nil {
		t.Error("an informer started after Stop")
	}
	var none *Informers
	if _, err := none.StorageClasses(); err == nil {
		t.Error("nil informers gave an informer")
	}
}
