//go:build e2e

package cleanup

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const ipLocalVolumes = "10.213.0.60"

// TestLocalVolumesOfALiveNodeWithTheSameHostname: two Nodes carry the
// kubernetes.io/hostname label "lv-shared" (a node replaced under the same
// hostname). Deleting the old one releases none of the local volumes pinned
// to that hostname — the live node can serve them — and says so: the
// plugin's result is "skipped" and a LocalVolumesHostnameShared Warning Event
// names the volume and the live node; its deletion is not held. A node
// deleted at the same time whose hostname nobody else carries has its volume
// released, so the plugin did run (the positive signal).
func TestLocalVolumesOfALiveNodeWithTheSameHostname(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	go playProtectionControllers(ctx, cp)
	const class = "local-lv-e2e"
	config := writeFile(t, cp.Dir, "config.yaml", fmt.Sprintf(`plugins:
  local-volumes:
    critical: true
    storageClasses: [%s]
  log: {}
`, class))
	w := startReplica(t, cp, "webhook-lv", ipLocalVolumes, config,
		"--cleanup-retry-base=500ms", "--cleanup-retry-max=2s")
	e := &env{cp: cp, dir: cp.Dir, procs: []*harness.Daemon{w}}
	e.leader(t)
	mustCreate(t, ctx, cp, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner"})
	mustCreate(t, ctx, cp, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}})

	// The old node and its replacement share the hostname; lv-alone does not.
	for name, host := range map[string]string{"lv-old": "lv-shared", "lv-new": "lv-shared", "lv-alone": "lv-alone"} {
		cp.KubectlT(t, harness.NodeYAML(name, map[string]string{corev1.LabelHostname: host}), "create", "-f", "-")
	}
	for _, name := range []string{"lv-old", "lv-new", "lv-alone"} {
		harness.WaitFor(t, 30*time.Second, "finalizer on "+name, func() bool {
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && slices.Contains(n.Finalizers, fin)
		})
	}
	shared, sharedClaim := createLocalPV(t, ctx, cp, "pv-lv-shared", "lv-shared", class, "data-lv-shared")
	alone, _ := createLocalPV(t, ctx, cp, "pv-lv-alone", "lv-alone", class, "")

	cp.KubectlT(t, "", "delete", "node", "lv-old", "lv-alone", "--wait=false")
	e.waitGone(t, "lv-alone", 30*time.Second)
	e.waitGone(t, "lv-old", 30*time.Second)

	harness.WaitFor(t, 10*time.Second, "lv-alone's volume released", func() bool {
		pv, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, alone, metav1.GetOptions{})
		return err != nil || pv.DeletionTimestamp != nil
	})
	if pv, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, shared, metav1.GetOptions{}); err != nil || pv.DeletionTimestamp != nil {
		t.Errorf("persistentvolume %s, pinned to the hostname live node lv-new carries, was deleted: %v", shared, err)
	}
	if c, err := cp.Client.CoreV1().PersistentVolumeClaims("apps").Get(ctx, sharedClaim, metav1.GetOptions{}); err != nil || c.DeletionTimestamp != nil {
		t.Errorf("claim apps/%s of the live node's volume was deleted: %v", sharedClaim, err)
	}
	// The plugin's result says so, and the deletion was not held for it.
	e.waitEvent(t, "lv-old", api.EventCleanupCompleted, "local-volumes=skipped")
	e.waitEvent(t, "lv-alone", api.EventCleanupCompleted, "local-volumes=success")
	e.waitEvent(t, "lv-old", api.EventLocalVolumesHostnameShared, "left persistentvolumes "+shared+" alone: they are pinned to hostname lv-shared, which live node lv-new also carries")
	if logLine(w.LogT(t), `"msg":"local persistentvolumes left alone: another live node carries the hostname they are pinned to"`, `"node":"lv-old"`) < 0 {
		t.Errorf("no log line saying lv-old's volumes were left alone")
	}
}
