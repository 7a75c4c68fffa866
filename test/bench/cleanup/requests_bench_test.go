//go:build e2e

package cleanup

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// storage enables the two plugins that read the API server's storage
// objects, with one VolumeAttachment and one local PersistentVolume (and
// its claim) per deleted node.
var storage = flag.Bool("cleanup.storage", true, "also run volumeattachments and local-volumes, with one VolumeAttachment and one local PersistentVolume (bound to a claim) per deleted node; false runs portworx and log only, as runs before 2026-11-28 did")

const (
	benchClass     = "local-bench"
	benchNamespace = "bench"
)

// storagePlugins is the configuration of the two plugins, in the order the
// docs' example runs them (portworx after both).
func storagePlugins() string {
	return "  volumeattachments: {}\n  local-volumes:\n    after: [volumeattachments]\n    storageClasses: [" + benchClass + "]\n"
}

// setupStorage creates the opted-in StorageClass and the claims' namespace.
func setupStorage(b *testing.B, c kubernetes.Interface) {
	b.Helper()
	ctx := context.Background()
	if _, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: benchClass}, Provisioner: "kubernetes.io/no-provisioner"}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// createStorage gives each of the n nodes prefix<i> a VolumeAttachment and a
// local PersistentVolume pinned by kubernetes.io/hostname, bound to a
// claim, 32 at a time.
func createStorage(b *testing.B, c kubernetes.Interface, prefix string, n int) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	work := make(chan int)
	var failed atomic.Value
	class := benchClass
	for range 32 {
		wg.Go(func() {
			for i := range work {
				node := fmt.Sprintf("%s%d", prefix, i)
				pvName := "pv-" + node
				va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-" + node},
					Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.bench.example", NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}}}
				if _, err := c.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
					failed.Store(err)
					continue
				}
				claim, err := c.CoreV1().PersistentVolumeClaims(benchNamespace).Create(ctx, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: "data-" + node},
					Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class, VolumeName: pvName,
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
				}, metav1.CreateOptions{})
				if err != nil {
					failed.Store(err)
					continue
				}
				pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}, Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              class,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + pvName}},
					ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: benchNamespace, Name: claim.Name, UID: claim.UID},
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
					}}}},
				}}
				if _, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("create storage objects: %v", err)
	}
}

// checkAndClearStorage fails unless every VolumeAttachment is gone and every
// PersistentVolume and claim is being deleted, then lifts the protection
// finalizers kube-controller-manager (not run here) would lift, and waits
// until they are gone, so the next round starts from the same state.
func checkAndClearStorage(b *testing.B, c kubernetes.Interface) {
	b.Helper()
	ctx := context.Background()
	vas, err := c.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(vas.Items) != 0 {
		b.Fatalf("%d volumeattachments left after the cleanup", len(vas.Items))
	}
	lift := []byte(`{"metadata":{"finalizers":null}}`)
	pvs, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if pv.DeletionTimestamp == nil {
			b.Fatalf("persistentvolume %s not released", pv.Name)
		}
		if _, err := c.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, lift, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.Fatal(err)
		}
	}
	pvcs, err := c.CoreV1().PersistentVolumeClaims(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, pvc := range pvcs.Items {
		if pvc.DeletionTimestamp == nil {
			b.Fatalf("claim %s not deleted", pvc.Name)
		}
		if _, err := c.CoreV1().PersistentVolumeClaims(benchNamespace).Patch(ctx, pvc.Name, types.MergePatchType, lift, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pvs, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pvcs, err := c.CoreV1().PersistentVolumeClaims(benchNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pvs.Items) == 0 && len(pvcs.Items) == 0, nil
	}); err != nil {
		b.Fatalf("released volumes and claims never gone: %v", err)
	}
}

// request is one series of apiserver_request_total without its code.
type request struct{ verb, resource string }

func (r request) String() string { return r.verb + " " + r.resource }

// apiserverRequests is the API server's apiserver_request_total by verb and
// resource (requests without a resource, such as /metrics, left out).
func apiserverRequests(b *testing.B, c kubernetes.Interface) map[request]float64 {
	b.Helper()
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("scrape the API server: %v", err)
	}
	samples, err := harness.Samples(bytes.NewReader(body), "apiserver_request_total")
	if err != nil {
		b.Fatal(err)
	}
	out := map[request]float64{}
	for _, s := range samples {
		if r := (request{s.Label("verb"), s.Label("resource")}); r.resource != "" {
			out[r] += s.Value
		}
	}
	return out
}

// perNode is the requests between before and after, less the benchmark's
// own (own), per deleted node. WATCH requests are counted when they end, so
// they are left out (the informers' watches stay open).
func perNode(before, after, own map[request]float64, nodes int) map[request]float64 {
	out := map[request]float64{}
	for r, v := range after {
		if r.verb == "WATCH" {
			continue
		}
		if d := v - before[r] - own[r]; d > 0 {
			out[r] = d / float64(nodes)
		}
	}
	return out
}

// requestTable renders the requests per deleted node of each variant, the
// median over its rounds per series, largest first.
func requestTable(variants []*variant, nodes int) string {
	series := map[request]bool{}
	for _, v := range variants {
		for _, round := range v.requests {
			for r := range round {
				series[r] = true
			}
		}
	}
	median := func(v *variant, r request) float64 {
		var xs []float64
		for _, round := range v.requests {
			xs = append(xs, round[r])
		}
		slices.Sort(xs)
		if len(xs) == 0 {
			return 0
		}
		return xs[len(xs)/2]
	}
	var keys []request
	for r := range series {
		keys = append(keys, r)
	}
	slices.SortFunc(keys, func(a, b request) int {
		if d := median(variants[0], b) - median(variants[0], a); d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(a.String(), b.String())
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n| API requests per deleted node (%d at once; median of the rounds) |", nodes)
	for _, v := range variants {
		fmt.Fprintf(&sb, " %s |", v.name)
	}
	sb.WriteString("\n| --- |" + strings.Repeat(" --- |", len(variants)) + "\n")
	totals := make([]float64, len(variants))
	for _, r := range keys {
		shown := false
		for _, v := range variants {
			shown = shown || median(v, r) >= 0.005
		}
		if !shown {
			continue
		}
		fmt.Fprintf(&sb, "| %s |", r)
		for i, v := range variants {
			fmt.Fprintf(&sb, " %.2f |", median(v, r))
			totals[i] += median(v, r)
		}
		sb.WriteString("\n")
	}
	sb.WriteString("| **all** |")
	for _, t := range totals {
		fmt.Fprintf(&sb, " **%.2f** |", t)
	}
	sb.WriteString("\n")
	return sb.String()
}
