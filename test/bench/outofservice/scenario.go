// Package outofservice plays, on real nodes with kube-controller-manager
// (attach-detach, pod GC, node lifecycle and taint eviction controllers, all
// at their defaults), a pod whose CSI volume is attached and in use on a node
// that is then switched off and deleted, and follows what happens to the
// Node, the pod and the VolumeAttachment: the scenario that
// test/e2e/outofservice asserts on with the out-of-service cleanup plugin,
// and that BenchmarkDetachAfterDelete times with the plugin and without it.
//
// No CSI driver runs: the attach-detach controller creates the
// VolumeAttachment of a CSI volume by itself, and the scenario plays the
// external-attacher's part (it marks each VolumeAttachment of its driver
// attached; no finalizer, so a detach is the object's deletion). The
// kubelet waits for the attach, then fails to mount (no node plugin is
// registered) but reports the volume in use, as a kubelet with a mounted
// volume does: what makes the controller wait before a detach it was not
// told is safe.
package outofservice

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	// Namespace is the chart's namespace, where the webhook's identity lives.
	Namespace = "kube-node-ready"
	// Apps is the namespace of the pods that use the volumes.
	Apps = "apps"
	// Driver is the CSI driver of the volumes, whose attacher the scenario plays.
	Driver = "oos.csi.example"

	// WithPlugin is the webhook's cleanup configuration with the
	// out-of-service plugin at its defaults (grace 30 s, wait 2 m).
	WithPlugin = "plugins:\n  out-of-service: {}\n  log: {}\n"
	// WithoutPlugin is the chart's default cleanup configuration: log only.
	WithoutPlugin = "plugins:\n  log: {}\n"
)

// Scenario is a cluster of real nodes with the chart's webhook identity
// (RBAC and policies with the out-of-service plugin's grant, its grace
// 30 s), the namespace Apps, and the external-attacher's part played for
// Driver until the context given to Setup ends.
type Scenario struct {
	C          *harness.Cluster
	kubeconfig string
}

// Setup prepares c for the scenario; the attacher it starts stops with ctx.
func Setup(ctx context.Context, tb testing.TB, c *harness.Cluster) *Scenario {
	tb.Helper()
	if err := c.ApplyChartRBAC(ctx, Namespace, "webhook.cleanup.plugins.out-of-service.grace=30s"); err != nil {
		tb.Fatal(err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, Namespace, harness.WebhookServiceAccount)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Apps}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	s := &Scenario{C: c, kubeconfig: kubeconfig}
	go s.playAttacher(ctx, tb)
	return s
}

// StartWebhook runs a webhook replica named name on ip with the chart's
// identity and the cleanup configuration config, and waits until it leads
// node cleanup.
func (s *Scenario) StartWebhook(tb testing.TB, name, ip, config string) *harness.Daemon {
	tb.Helper()
	path := filepath.Join(s.C.Dir, name+"-config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	w := s.C.StartWebhook(tb, name, ip, "--kubeconfig="+s.kubeconfig, "--namespace="+Namespace, "--pod-name="+name,
		"--webhook-config-name=", "--extra-sans="+ip, "--config="+path)
	w.WaitReady(tb, 30*time.Second)
	harness.WaitFor(tb, 30*time.Second, name+" leads", func() bool {
		v, err := w.TryMetric("node_cleanup_leader")
		return err == nil && v == 1
	})
	return w
}

// WaitFinalizer waits until the leading webhook put its finalizer on the
// node named name.
func (s *Scenario) WaitFinalizer(ctx context.Context, tb testing.TB, name string) {
	tb.Helper()
	harness.WaitFor(tb, 30*time.Second, "finalizer on "+name, func() bool {
		n, err := s.C.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && slices.Contains(n.Finalizers, harness.Finalizer)
	})
}

// Volume creates a CSI PersistentVolume pv-<name>, its bound claim and a
// pod app-<name> using it on node n, and waits until the VolumeAttachment
// is attached and the kubelet reports the volume in use.
func (s *Scenario) Volume(ctx context.Context, tb testing.TB, n *harness.RealNode, name string) {
	tb.Helper()
	client := s.C.Client
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: Driver, VolumeHandle: "vol-" + name}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: Apps, Name: "data-" + name},
			StorageClassName:              "",
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: Apps, Name: "data-" + name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:       pv.Name,
			StorageClassName: new(string),
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: Apps, Name: "app-" + name},
		Spec: corev1.PodSpec{
			NodeName:   n.Name,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10.1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(Apps).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	harness.WaitFor(tb, time.Minute, "claim "+pvc.Name+" bound", func() bool {
		got, err := client.CoreV1().PersistentVolumeClaims(Apps).Get(ctx, pvc.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound
	})
	if _, err := client.CoreV1().Pods(Apps).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	inUse := corev1.UniqueVolumeName("kubernetes.io/csi/" + Driver + "^vol-" + name)
	harness.WaitFor(tb, 2*time.Minute, "volume attached to "+n.Name+" and in use", func() bool {
		node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil || !slices.Contains(node.Status.VolumesInUse, inUse) {
			return false
		}
		va := s.attachment(ctx, n.Name, pv.Name)
		return va != nil && va.Status.Attached
	})
}

// attachment is the VolumeAttachment of pv on node, nil when there is none
// or the list failed.
func (s *Scenario) attachment(ctx context.Context, node, pv string) *storagev1.VolumeAttachment {
	vas, err := s.C.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for i, va := range vas.Items {
		if va.Spec.NodeName == node && va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == pv {
			return &vas.Items[i]
		}
	}
	return nil
}

// playAttacher is the external-attacher's part for Driver: every
// VolumeAttachment of it is marked attached.
func (s *Scenario) playAttacher(ctx context.Context, tb testing.TB) {
	client := s.C.Client
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, va := range vas.Items {
			if va.Spec.Attacher != Driver || va.Status.Attached || va.DeletionTimestamp != nil {
				continue
			}
			va.Status.Attached = true
			if _, err := client.StorageV1().VolumeAttachments().UpdateStatus(ctx, &va, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				tb.Logf("attacher: mark %s attached: %v", va.Name, err)
			}
		}
		return false, nil
	})
}

// Run is what happened after a node was deleted, and when.
type Run struct {
	// Deleted is when the Node's delete was sent.
	Deleted time.Time
	// UnknownAt, TaintedAt (out of service), PodGoneAt, VAGoneAt and
	// NodeGoneAt are when each was first seen; zero if never.
	UnknownAt, TaintedAt, PodGoneAt, VAGoneAt, NodeGoneAt time.Time
	// UnknownAtTaint: the Node's Ready condition was Unknown on the object
	// that first carried the out-of-service taint.
	UnknownAtTaint bool
}

// Since is at after the delete, rounded to the second, or "never".
func (r Run) Since(at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Sub(r.Deleted).Round(time.Second).String()
}

// SwitchOffAndDelete switches node n off (kubelet, containerd, its
// containers and its link gone, as a machine stopped), deletes its Node
// and follows the Node and the VolumeAttachments with watches (a taint
// that lives for milliseconds is seen) and the pod app-<name> every 500 ms,
// until the VolumeAttachment and the pod are gone, or timeout.
func (s *Scenario) SwitchOffAndDelete(ctx context.Context, tb testing.TB, n *harness.RealNode, name string, timeout time.Duration) Run {
	tb.Helper()
	client := s.C.Client
	nodes, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + n.Name})
	if err != nil {
		tb.Fatal(err)
	}
	defer nodes.Stop()
	vas, err := client.StorageV1().VolumeAttachments().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer vas.Stop()
	if err := n.Stop(); err != nil {
		tb.Fatal(err)
	}
	r := Run{Deleted: time.Now()}
	if err := client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
		tb.Fatal(err)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	end := time.After(timeout)
	for r.VAGoneAt.IsZero() || r.PodGoneAt.IsZero() {
		select {
		case <-end:
			return r
		case ev, ok := <-nodes.ResultChan():
			if !ok {
				tb.Fatal("the node watch ended")
			}
			r.sawNode(ev, time.Now())
		case ev, ok := <-vas.ResultChan():
			if !ok {
				tb.Fatal("the volumeattachment watch ended")
			}
			va, isVA := ev.Object.(*storagev1.VolumeAttachment)
			if isVA && ev.Type == watch.Deleted && va.Spec.NodeName == n.Name && r.VAGoneAt.IsZero() {
				r.VAGoneAt = time.Now()
			}
		case <-tick.C:
			if _, err := client.CoreV1().Pods(Apps).Get(ctx, "app-"+name, metav1.GetOptions{}); apierrors.IsNotFound(err) && r.PodGoneAt.IsZero() {
				r.PodGoneAt = time.Now()
			}
		}
	}
	return r
}

// sawNode records what a watch event of the deleted Node shows.
func (r *Run) sawNode(ev watch.Event, now time.Time) {
	node, isNode := ev.Object.(*corev1.Node)
	if !isNode {
		return
	}
	if ev.Type == watch.Deleted {
		r.NodeGoneAt = now
		return
	}
	unknown := slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown
	})
	if unknown && r.UnknownAt.IsZero() {
		r.UnknownAt = now
	}
	if r.TaintedAt.IsZero() && slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService }) {
		r.TaintedAt, r.UnknownAtTaint = now, unknown
	}
}
