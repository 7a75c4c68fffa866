//go:build e2e

package cleanup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// remediationScans is how many scans BenchmarkRemediationScan times.
const remediationScans = 10

// BenchmarkRemediationScan times the webhook's remediation scans with
// -cleanup.cache-nodes realistic Nodes in its remediation cache: every one
// unverified (the startup taint, no verified label), the most a scan can
// be given, none past --unverified-deadline yet (so a scan checks the API
// server and plans over all of them, and has nothing to act on). It reads
// node_remediation_scan_duration_seconds from the webhook's /metrics: a
// scrape in which the histogram's count moved by exactly one gives that
// scan's duration as the sum's increase. It reports the median and the max.
func BenchmarkRemediationScan(b *testing.B) {
	for range b.N {
		benchRemediationScan(b)
	}
}

func benchRemediationScan(b *testing.B) {
	cp := harness.StartT(b, harness.Options{NoDNS: true})
	fast := rest.CopyConfig(cp.Config)
	fast.QPS, fast.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(fast)
	if err != nil {
		b.Fatal(err)
	}
	// With the finalizer already on, the cleanup watcher has nothing to
	// back-fill: the scans do not share the client with 10 000 patches.
	createNodes(b, client, "unverified-", *cache, true, true, func(n *corev1.Node) {
		delete(n.Labels, "node-ready/verified")
		n.Spec.Taints = []corev1.Taint{harness.StartupTaint}
	})
	hook := cp.StartWebhook(b, "webhook-remediation", webhookIP, "--kubeconfig="+cp.Kubeconfig, "--namespace=kube-system",
		"--webhook-config-name=", "--remediation=report", "--remediation-interval=1s")
	hook.WaitReady(b, 30*time.Second)
	// The first scan runs once the informer holds every unverified node.
	waitMetric(b, hook, "node_remediation_scans_total", 1, 5*time.Minute)

	var times []time.Duration
	lastCount, lastSum := scanHistogram(b, hook)
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Minute, false, func(context.Context) (bool, error) {
		count, sum := scanHistogram(b, hook)
		if count == lastCount+1 {
			times = append(times, time.Duration((sum-lastSum)*float64(time.Second)))
		}
		lastCount, lastSum = count, sum
		return len(times) >= remediationScans, nil
	}); err != nil {
		b.Fatalf("%d scans timed, want %d: %v", len(times), remediationScans, err)
	}
	if got := hook.Metric(b, "node_remediation_scans_total", `result="api_unreachable"`); got != 0 {
		b.Fatalf("%v scans found the API server unreachable", got)
	}
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	median, slowest := sorted[len(sorted)/2], sorted[len(sorted)-1]
	b.ReportMetric(median.Seconds(), "scan-median-s")
	b.ReportMetric(slowest.Seconds(), "scan-max-s")
	b.ReportMetric(float64(len(times)), "scans")

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nRemediation scans with %d unverified nodes cached (--remediation=report, none past the deadline): %d scans, median **%s**, max %s; each: %v\n",
		*cache, len(times), median.Round(100*time.Microsecond), slowest.Round(100*time.Microsecond), times)
	b.Logf("\n%s", sb.String())
	fmt.Print(sb.String())
}

// scanHistogram is the count and sum of the webhook's ok scan durations,
// from one scrape so the two belong together.
func scanHistogram(b *testing.B, hook *harness.Daemon) (count, sum float64) {
	b.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(hook.URL("/metrics"))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	const name, ok = "node_remediation_scan_duration_seconds", `result="ok"`
	if count, err = harness.SumMetric(bytes.NewReader(body), name+"_count", ok); err != nil {
		b.Fatal(err)
	}
	if sum, err = harness.SumMetric(bytes.NewReader(body), name+"_sum", ok); err != nil {
		b.Fatal(err)
	}
	return count, sum
}
