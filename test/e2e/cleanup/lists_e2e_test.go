//go:build e2e

package cleanup

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ipLists       = "10.213.0.45"
	listsNodes    = 20
	attacherFin   = "external-attacher/csi-e2e-example"
	listsClass    = "local-lists-e2e"
	detachAfter   = 600 * time.Millisecond
	listsSelector = "e2e=lists"
)

// storageResources are what the volumeattachments and local-volumes
// plugins read.
var storageResources = []string{"volumeattachments", "persistentvolumes", "storageclasses"}

// TestStoragePluginsWatchInsteadOfListing (issue 35): the volumeattachments
// and local-volumes plugins read VolumeAttachments, PersistentVolumes and
// StorageClasses through one watch each, opened when the webhook starts
// with them enabled. Deleting 20 nodes at once — each with a
// VolumeAttachment that its attacher holds 600 ms after the delete, so the
// plugin waits and polls, and a local PersistentVolume with its claim —
// makes no LIST of any of the three at the API server
// (apiserver_request_total by verb and resource): the reads come from the
// informers' cache, only the deletes and the fresh Node reads of the safety
// gates go to the API server. Before, each node cost a LIST of every
// VolumeAttachment per poll and a LIST of every PersistentVolume and
// StorageClass.
func TestStoragePluginsWatchInsteadOfListing(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	config := writeFile(t, cp.Dir, "config.yaml", fmt.Sprintf(`plugins:
  volumeattachments:
    critical: true
    timeout: 30s
    pollInterval: 200ms
  local-volumes:
    critical: true
    after: [volumeattachments]
    storageClasses: [%s]
  log: {}
`, listsClass))
	// The API server's own watches (its admission plugins'), before ours.
	ownWatches := map[string]float64{}
	for _, r := range storageResources {
		ownWatches[r] = apiserverMetric(t, ctx, cp, "apiserver_longrunning_requests", `verb="WATCH"`, `resource="`+r+`"`)
	}
	w := startReplica(t, cp, "webhook-lists", ipLists, config, "--cleanup-retry-base=500ms", "--cleanup-retry-max=2s")
	e := &env{cp: cp, dir: cp.Dir, procs: []*harness.Daemon{w}}
	e.leader(t)
	mustCreate(t, ctx, cp, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: listsClass}, Provisioner: "kubernetes.io/no-provisioner"})
	mustCreate(t, ctx, cp, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}})
	attacher, err := cp.Client.StorageV1().VolumeAttachments().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer attacher.Stop()
	go playAttacher(ctx, cp, attacher)

	var vas, pvs []string
	for i := range listsNodes {
		name := fmt.Sprintf("lists-%02d", i)
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{fin},
			Labels: map[string]string{"e2e": "lists", corev1.LabelHostname: name}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		va := createVA(t, ctx, cp, "va-"+name, name)
		if _, err := cp.Client.StorageV1().VolumeAttachments().Patch(ctx, va, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":["`+attacherFin+`"]}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		pv, _ := createLocalPV(t, ctx, cp, "pv-"+name, name, listsClass, "data-"+name)
		vas, pvs = append(vas, va), append(pvs, pv)
	}
	// The watches are open: the informers were started with the plugins.
	for _, r := range storageResources {
		harness.WaitFor(t, 30*time.Second, "the webhook's watch of "+r, func() bool {
			return apiserverMetric(t, ctx, cp, "apiserver_longrunning_requests", `verb="WATCH"`, `resource="`+r+`"`) > ownWatches[r]
		})
	}
	before := apiserverRequests(t, ctx, cp)

	if err := cp.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: listsSelector}); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d nodes cleaned up and gone", listsNodes), func() bool {
		l, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: listsSelector})
		return err == nil && len(l.Items) == 0
	})
	after := apiserverRequests(t, ctx, cp)

	// The plugins did their work (the positive signal for "no LIST").
	for _, va := range vas {
		if _, err := cp.Client.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("volumeattachment %s left: %v", va, err)
		}
	}
	for _, pv := range pvs {
		if p, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
			t.Errorf("local persistentvolume %s not released", pv)
		}
	}
	for _, plugin := range []string{"volumeattachments", "local-volumes"} {
		if got := w.Metric(t, "node_cleanup_operations_total", `plugin="`+plugin+`"`, `result="success"`); got != listsNodes {
			t.Errorf("node_cleanup_operations_total{%s,success} = %v, want %d", plugin, got, listsNodes)
		}
	}

	var report []string
	for k, v := range after {
		if d := v - before[k]; d > 0 && slices.Contains(storageResources, k.resource) || d > 0 && k.resource == "persistentvolumeclaims" {
			report = append(report, fmt.Sprintf("%s %s %.2f", k.verb, k.resource, d/listsNodes))
		}
	}
	slices.Sort(report)
	t.Logf("requests per deleted node by verb and resource: %s", strings.Join(report, ", "))
	for _, r := range storageResources {
		if d := after[requestKey{"LIST", r}] - before[requestKey{"LIST", r}]; d != 0 {
			t.Errorf("%v LISTs of %s while %d nodes were cleaned up, want 0: reads come from the watch", d, r, listsNodes)
		}
		// Since the start: at most the informer's first list.
		if n := after[requestKey{"LIST", r}]; n > 1 {
			t.Errorf("%v LISTs of %s since the webhook started, want at most the informer's first", n, r)
		}
	}
	// The webhook keeps one watch of each (the stand-in attacher has a
	// second of VolumeAttachments).
	for r, ours := range map[string]float64{"volumeattachments": 2, "persistentvolumes": 1, "storageclasses": 1} {
		if got := apiserverMetric(t, ctx, cp, "apiserver_longrunning_requests", `verb="WATCH"`, `resource="`+r+`"`) - ownWatches[r]; got != ours {
			t.Errorf("%v open watches of %s besides the API server's own, want %v", got, r, ours)
		}
	}
	if got, want := after[requestKey{"DELETE", "volumeattachments"}]-before[requestKey{"DELETE", "volumeattachments"}], float64(listsNodes); got != want {
		t.Errorf("%v deletes of volumeattachments, want one per node (%v)", got, want)
	}
}

// playAttacher stands in for the CSI external-attacher, which the harness
// does not run: detachAfter after a VolumeAttachment is marked for deletion
// it lifts its finalizer. It follows w, a watch (no LIST: the test counts
// them).
func playAttacher(ctx context.Context, cp *harness.ControlPlane, w watch.Interface) {
	for ev := range w.ResultChan() {
		va, ok := ev.Object.(*storagev1.VolumeAttachment)
		if !ok || ev.Type != watch.Modified || va.DeletionTimestamp == nil || !slices.Contains(va.Finalizers, attacherFin) {
			continue
		}
		go func() {
			time.Sleep(detachAfter) // the detach the attacher waits for
			_, _ = cp.Client.StorageV1().VolumeAttachments().Patch(ctx, va.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}()
	}
}

type requestKey struct{ verb, resource string }

// apiserverRequests is the API server's apiserver_request_total by verb and resource.
func apiserverRequests(t *testing.T, ctx context.Context, cp *harness.ControlPlane) map[requestKey]float64 {
	t.Helper()
	samples, err := harness.Samples(bytes.NewReader(apiserverMetrics(t, ctx, cp)), "apiserver_request_total")
	if err != nil {
		t.Fatal(err)
	}
	out := map[requestKey]float64{}
	for _, s := range samples {
		out[requestKey{s.Label("verb"), s.Label("resource")}] += s.Value
	}
	return out
}

// apiserverMetric sums the API server's samples of name whose labels contain all of match.
func apiserverMetric(t *testing.T, ctx context.Context, cp *harness.ControlPlane, name string, match ...string) float64 {
	t.Helper()
	v, err := harness.SumMetric(bytes.NewReader(apiserverMetrics(t, ctx, cp)), name, match...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func apiserverMetrics(t *testing.T, ctx context.Context, cp *harness.ControlPlane) []byte {
	t.Helper()
	body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("scrape the API server: %v", err)
	}
	return body
}
