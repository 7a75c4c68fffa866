//go:build e2e

// Package outofservice_test measures, on real nodes with
// kube-controller-manager (attach-detach, pod GC, node lifecycle and taint
// eviction controllers, all at their defaults), how long the
// VolumeAttachment of a pod on a switched-off node lives once the node is
// deleted, with the out-of-service cleanup plugin and without it.
//
// No CSI driver runs here: the attach-detach controller creates the
// VolumeAttachment of a CSI volume by itself, and the test plays the
// external-attacher's part (it marks each VolumeAttachment of its driver
// attached; no finalizer, so a detach is the object's deletion). The
// kubelet waits for the attach, then fails to mount (no node plugin is
// registered) but reports the volume in use, as a kubelet with a mounted
// volume does: what makes the controller wait before a detach it was not
// told is safe.
package outofservice_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup/plugins"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ns     = "kube-node-ready"
	apps   = "apps"
	driver = "oos.csi.example"
)

var c *harness.Cluster

func TestMain(m *testing.M) {
	harness.MainWithCluster(m, harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, Nodes: 3},
		func(_ context.Context, cluster *harness.Cluster) error { c = cluster; return nil })
}

// TestOutOfServiceDetachesAtOnce: a pod with a CSI volume runs on a node
// (the volume attached and in use); the node is switched off, then deleted.
// With the out-of-service plugin the webhook taints the node once
// kube-controller-manager marked it Unknown and the grace passed, the
// taint evicts the pod, pod GC force-deletes it and the attach-detach
// controller detaches at once; without the plugin the Node goes at once,
// pod GC deletes the orphaned pod, and the controller waits its 6-minute
// force-detach timeout because the volume was last reported in use. Beside
// the first, a node deleted while its kubelet runs is never tainted: its
// cleanup ends with the plugin skipped. Times are logged as figures.
func TestOutOfServiceDetachesAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := c.ApplyChartRBAC(ctx, ns, "webhook.cleanup.plugins.out-of-service.grace=30s"); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apps}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go playAttacher(ctx, t)

	live, with, without := c.Nodes[0], c.Nodes[1], c.Nodes[2]

	// With the plugin (its defaults: grace 30s, wait 2m).
	w := startWebhook(t, "webhook-oos", "10.213.0.71", kubeconfig, "plugins:\n  out-of-service: {}\n  log: {}\n")
	for _, n := range []string{live.Name, with.Name} {
		waitFinalizer(t, ctx, n)
	}
	volume(t, ctx, with, "with")
	liveDeleted := time.Now()
	if err := c.Client.CoreV1().Nodes().Delete(ctx, live.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := switchOffAndDelete(t, ctx, with, "with", 5*time.Minute)
	if r.taintedAt.IsZero() {
		t.Fatalf("node %s was never tainted %s", with.Name, plugins.OutOfServiceTaint.ToString())
	}
	if !r.unknownAtTaint {
		t.Errorf("node %s was tainted while its Ready condition was not Unknown", with.Name)
	}
	if r.vaGoneAt.IsZero() {
		t.Fatalf("with the plugin: the VolumeAttachment of node %s was not gone within 5m", with.Name)
	}
	t.Logf("figure: with out-of-service: node deleted -> Ready Unknown %s, -> tainted %s, -> pod gone %s, -> VolumeAttachment gone %s, -> Node gone %s",
		r.since(r.unknownAt), r.since(r.taintedAt), r.since(r.podGoneAt), r.since(r.vaGoneAt), r.since(r.nodeGoneAt))

	// The live node's cleanup ended (the plugin waited 2m, then skipped)
	// and it was never tainted: the positive signal is the Event.
	c.WaitEvent(t, 3*time.Minute, "Node", live.Name, api.EventCleanupCompleted, "out-of-service=skipped")
	t.Logf("figure: live node: deleted -> cleanup completed with out-of-service skipped %s", time.Since(liveDeleted).Round(time.Second))
	if taintSeen(w.LogT(t), live.Name) {
		t.Errorf("node %s, whose kubelet answered, was tainted out of service", live.Name)
	}
	if err := w.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	// Without the plugin (the chart's default: log only).
	startWebhook(t, "webhook-default", "10.213.0.72", kubeconfig, "plugins:\n  log: {}\n")
	waitFinalizer(t, ctx, without.Name)
	volume(t, ctx, without, "without")
	r = switchOffAndDelete(t, ctx, without, "without", 10*time.Minute)
	if !r.taintedAt.IsZero() {
		t.Errorf("without the plugin node %s was tainted out of service", without.Name)
	}
	if r.vaGoneAt.IsZero() {
		t.Fatalf("without the plugin: the VolumeAttachment of node %s was not gone within 10m", without.Name)
	}
	t.Logf("figure: without out-of-service: node deleted -> Node gone %s, -> pod gone %s, -> VolumeAttachment gone %s",
		r.since(r.nodeGoneAt), r.since(r.podGoneAt), r.since(r.vaGoneAt))
}

// startWebhook runs a webhook replica with the chart's identity and the
// cleanup configuration config.
func startWebhook(t *testing.T, name, ip, kubeconfig, config string) *harness.Daemon {
	t.Helper()
	path := filepath.Join(c.Dir, name+"-config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	w := c.StartWebhook(t, name, ip, "--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name="+name,
		"--webhook-config-name=", "--extra-sans="+ip, "--config="+path)
	w.WaitReady(t, 30*time.Second)
	harness.WaitFor(t, 30*time.Second, name+" leads", func() bool {
		v, err := w.TryMetric("node_cleanup_leader")
		return err == nil && v == 1
	})
	return w
}

func waitFinalizer(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	harness.WaitFor(t, 30*time.Second, "finalizer on "+name, func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && slices.Contains(n.Finalizers, harness.Finalizer)
	})
}

// volume creates a CSI PersistentVolume, its bound claim and a pod using it
// on node n, and waits until the VolumeAttachment is attached and the
// kubelet reports the volume in use.
func volume(t *testing.T, ctx context.Context, n *harness.RealNode, name string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + name}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: apps, Name: "data-" + name},
			StorageClassName:              "",
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "data-" + name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:       pv.Name,
			StorageClassName: new(string),
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "app-" + name},
		Spec: corev1.PodSpec{
			NodeName:   n.Name,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10.1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(apps).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "claim "+pvc.Name+" bound", func() bool {
		got, err := c.Client.CoreV1().PersistentVolumeClaims(apps).Get(ctx, pvc.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound
	})
	if _, err := c.Client.CoreV1().Pods(apps).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inUse := corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^vol-" + name)
	harness.WaitFor(t, 2*time.Minute, "volume attached to "+n.Name+" and in use", func() bool {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil || !slices.Contains(node.Status.VolumesInUse, inUse) {
			return false
		}
		va, _ := attachment(ctx, n.Name, pv.Name)
		return va != nil && va.Status.Attached
	})
}

// attachment is the VolumeAttachment of pv on node (nil when there is
// none) and whether the list was read at all.
func attachment(ctx context.Context, node, pv string) (*storagev1.VolumeAttachment, bool) {
	vas, err := c.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, false
	}
	for i, va := range vas.Items {
		if va.Spec.NodeName == node && va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == pv {
			return &vas.Items[i], true
		}
	}
	return nil, true
}

// playAttacher is the external-attacher's part for driver: every
// VolumeAttachment of it is marked attached.
func playAttacher(ctx context.Context, t *testing.T) {
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		vas, err := c.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, va := range vas.Items {
			if va.Spec.Attacher != driver || va.Status.Attached || va.DeletionTimestamp != nil {
				continue
			}
			va.Status.Attached = true
			if _, err := c.Client.StorageV1().VolumeAttachments().UpdateStatus(ctx, &va, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				t.Logf("attacher: mark %s attached: %v", va.Name, err)
			}
		}
		return false, nil
	})
}

// run is what happened after a node was deleted, and when.
type run struct {
	deleted                                               time.Time
	unknownAt, taintedAt, podGoneAt, vaGoneAt, nodeGoneAt time.Time
	unknownAtTaint                                        bool
}

func (r run) since(at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Sub(r.deleted).Round(time.Second).String()
}

// switchOffAndDelete switches node n off (kubelet, containerd, its
// containers and its link gone, as a machine stopped), deletes its Node
// and follows the Node and the VolumeAttachments with watches (a taint
// that lives for milliseconds is seen) and the pod every 500 ms, until the
// VolumeAttachment and the pod are gone, or timeout.
func switchOffAndDelete(t *testing.T, ctx context.Context, n *harness.RealNode, name string, timeout time.Duration) run {
	t.Helper()
	nodes, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + n.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer nodes.Stop()
	vas, err := c.Client.StorageV1().VolumeAttachments().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer vas.Stop()
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	r := run{deleted: time.Now()}
	if err := c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	end := time.After(timeout)
	for r.vaGoneAt.IsZero() || r.podGoneAt.IsZero() {
		select {
		case <-end:
			return r
		case ev, ok := <-nodes.ResultChan():
			if !ok {
				t.Fatal("the node watch ended")
			}
			now := time.Now()
			node, isNode := ev.Object.(*corev1.Node)
			if !isNode {
				continue
			}
			if ev.Type == watch.Deleted {
				r.nodeGoneAt = now
				continue
			}
			unknown := false
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionUnknown {
					unknown = true
				}
			}
			if unknown && r.unknownAt.IsZero() {
				r.unknownAt = now
			}
			for _, tn := range node.Spec.Taints {
				if tn.Key == corev1.TaintNodeOutOfService && r.taintedAt.IsZero() {
					r.taintedAt, r.unknownAtTaint = now, unknown
				}
			}
		case ev, ok := <-vas.ResultChan():
			if !ok {
				t.Fatal("the volumeattachment watch ended")
			}
			va, isVA := ev.Object.(*storagev1.VolumeAttachment)
			if isVA && ev.Type == watch.Deleted && va.Spec.NodeName == n.Name && r.vaGoneAt.IsZero() {
				r.vaGoneAt = time.Now()
			}
		case <-tick.C:
			if _, err := c.Client.CoreV1().Pods(apps).Get(ctx, "app-"+name, metav1.GetOptions{}); apierrors.IsNotFound(err) && r.podGoneAt.IsZero() {
				r.podGoneAt = time.Now()
			}
		}
	}
	return r
}

// taintSeen reports whether the webhook's log says it tainted node.
func taintSeen(logText, node string) bool {
	for _, line := range strings.Split(logText, "\n") {
		if strings.Contains(line, `"msg":"node tainted out of service`) && strings.Contains(line, fmt.Sprintf(`"node":%q`, node)) {
			return true
		}
	}
	return false
}
