package plugins

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// hostNode is a Node named name whose kubernetes.io/hostname label is host.
func hostNode(name, host string, deleting bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID(),
		Labels: map[string]string{corev1.LabelHostname: host}, CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))}}
	if deleting {
		n.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		n.Finalizers = []string{"infra.894.io/node-cleanup"}
	}
	return n
}

// localPV is a PersistentVolume of class "local" pinned by term.
func localPV(name string, term corev1.NodeSelectorTerm) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID(), CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec: corev1.PersistentVolumeSpec{StorageClassName: "local",
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}}},
	}
}

// The local-volumes plugin leaves alone the volumes pinned to a hostname
// that another live Node also carries: they are that node's as much as the
// deleted one's. Volumes pinned by the deleted node's name, and those whose
// hostname only Nodes being deleted carry, are released as before. A
// conflict is a Warning Event on the deleted Node and a cleanup.Skip, not a
// failure.
func TestLocalVolumesLeaveAHostnameAnotherLiveNodeCarries(t *testing.T) {
	byName := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"old"}}}}
	tests := []struct {
		name      string
		others    []runtime.Object
		wantGone  []string
		wantEvent string
	}{
		{"no other node carries the hostname", nil, []string{"pv-host", "pv-name"}, ""},
		{"a live node replaced it under the same hostname", []runtime.Object{hostNode("new", "worker-1", false)}, []string{"pv-name"}, api.EventLocalVolumesHostnameShared},
		{"another node with that hostname is being deleted too", []runtime.Object{hostNode("also-going", "worker-1", true)}, []string{"pv-host", "pv-name"}, ""},
		{"a live node with another hostname", []runtime.Object{hostNode("other", "worker-2", false)}, []string{"pv-host", "pv-name"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := hostNode("old", "worker-1", true)
			objs := append([]runtime.Object{old,
				&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}},
				localPV("pv-host", hostnameTerm("worker-1")), localPV("pv-name", byName)}, tt.others...)
			client := fake.NewClientset(objs...)
			rec := events.NewFakeRecorder(10)
			deps := storageDeps(t, client)
			deps.Recorder = rec
			p, err := newLocalVolumes(deps, []byte(`{"storageClasses":["local"]}`))
			if err != nil {
				t.Fatal(err)
			}
			err = p.Cleanup(context.Background(), old)
			var skip *cleanup.Skip
			switch {
			case tt.wantEvent == "" && err != nil:
				t.Fatalf("Cleanup = %v, want nil", err)
			case tt.wantEvent != "" && (!errors.As(err, &skip) || !strings.Contains(skip.Reason, "left persistentvolumes pv-host alone")):
				t.Fatalf("Cleanup = %v, want a cleanup.Skip saying pv-host was left alone (not a failure)", err)
			}
			pvs, err := client.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var gone []string
			for _, name := range []string{"pv-host", "pv-name"} {
				if !slices.ContainsFunc(pvs.Items, func(pv corev1.PersistentVolume) bool { return pv.Name == name }) {
					gone = append(gone, name)
				}
			}
			if !slices.Equal(gone, tt.wantGone) {
				t.Errorf("released %v, want %v", gone, tt.wantGone)
			}
			var got []string
			for len(rec.Events) > 0 {
				got = append(got, <-rec.Events)
			}
			switch {
			case tt.wantEvent == "" && len(got) > 0:
				t.Errorf("events %q, want none", got)
			case tt.wantEvent != "" && (len(got) != 1 || !strings.Contains(got[0], "Warning "+tt.wantEvent) || !strings.Contains(got[0], "pv-host") || !strings.Contains(got[0], "new")):
				t.Errorf("events %q, want one Warning %s naming pv-host and node new", got, tt.wantEvent)
			}
		})
	}
}
