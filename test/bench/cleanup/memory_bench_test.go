//go:build e2e

package cleanup

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	memoryRounds = flag.Int("cleanup.memory-rounds", 3, "rounds of BenchmarkWebhookMemory, each build once per round")
	// The chart sets GOMEMLIMIT from the container's memory limit
	// (resourceFieldRef limits.memory), so the replica here gets it too.
	goMemLimit = flag.String("cleanup.gomemlimit", "128MiB", "GOMEMLIMIT of BenchmarkWebhookMemory's replicas, as the chart sets it from webhook.resources.limits.memory")
	// A build of a commit, not of a working tree that others edit too.
	underTest = flag.String("cleanup.webhook", "", "the webhook binary BenchmarkWebhookMemory measures (default: bin/kube-node-ready-webhook)")
	memDelete = flag.Int("cleanup.memory-delete", 1000, "nodes BenchmarkWebhookMemory deletes at once after the back-fill, to measure the peak with their cleanups (0: none)")
)

// BenchmarkWebhookMemory measures the webhook as the chart runs it (its
// default flags, GOMEMLIMIT from the memory limit) with -cleanup.cache-nodes
// cloud-shaped Nodes (nodeshape_test.go) created without the finalizer while
// no replica ran: the time from the process's start until every node
// carries the finalizer (back-fill), then, leading with a synced cache, its
// VmRSS (median of 10 samples a second apart), VmHWM (the peak) and Go heap
// in use (go_memstats_heap_inuse_bytes); then it deletes
// -cleanup.memory-delete of them at once (one log plugin: the cleanups, their
// finalizer removals and Events) and reads VmHWM and the heap again once they
// are gone. Each round starts a fresh replica
// of this build and, with -cleanup.baseline, of the baseline, in turns on
// one control plane (the nodes' finalizers removed between them).
func BenchmarkWebhookMemory(b *testing.B) {
	for range b.N {
		benchWebhookMemory(b)
	}
}

// memoryRun is one replica's figures.
type memoryRun struct {
	backfill                    time.Duration
	backfillCPU                 time.Duration // the replica's CPU time until back-fill ended
	rssKiB, hwmKiB, heapInuseKB int
	// After the mass deletion.
	deleteHWMKiB, deleteHeapKB int
}

func benchWebhookMemory(b *testing.B) {
	cp := harness.StartT(b, harness.Options{NoDNS: true})
	fast := rest.CopyConfig(cp.Config)
	fast.QPS, fast.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(fast)
	if err != nil {
		b.Fatal(err)
	}
	config := filepath.Join(cp.Dir, "cleanup.yaml")
	if err := os.WriteFile(config, []byte("plugins:\n  log: {}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	args := []string{
		"--listen-address=" + net.JoinHostPort(webhookIP, strconv.Itoa(harness.WebhookPort)),
		"--metrics-bind-address=" + net.JoinHostPort(webhookIP, strconv.Itoa(harness.MetricsPort)),
		"--kubeconfig=" + cp.Kubeconfig, "--namespace=kube-system", "--webhook-config-name=", "--config=" + config,
	}
	createNodes(b, client, "cache-", *cache, true, false)
	shape := nodeShape(b, client, "cache-0")

	type build struct {
		name, bin string
		runs      []memoryRun
	}
	builds := []*build{{name: "this build", bin: *underTest}}
	if *underTest == "" {
		builds[0].bin = harness.BuiltBinary(b, harness.WebhookBinary)
	} else {
		builds[0].name = *underTest
	}
	if *baseline != "" {
		builds = append(builds, &build{name: *baseline, bin: *baseline})
	}
	first := true
	for round := range *memoryRounds {
		order := slices.Clone(builds)
		if round%2 == 1 {
			slices.Reverse(order) // neither build always runs on a cluster fresh from the other
		}
		for _, v := range order {
			if !first {
				if *memDelete > 0 {
					createNodes(b, client, "cache-", *memDelete, true, false) // the ones deleted
				}
				stripFinalizers(b, client, "cache-", *cache)
			}
			first = false
			run := measureReplica(b, cp, client, fmt.Sprintf("webhook-mem-%d-%d", round, slices.Index(builds, v)), v.bin, args)
			v.runs = append(v.runs, run)
			b.Logf("round %d (%s): back-fill %.1f s (CPU %.1f s), VmRSS %.1f MiB, VmHWM %.1f MiB, heap in use %.1f MiB; after %d deleted: VmHWM %.1f MiB, heap in use %.1f MiB",
				round, v.name, run.backfill.Seconds(), run.backfillCPU.Seconds(), mib(run.rssKiB), mib(run.hwmKiB), mib(run.heapInuseKB), *memDelete, mib(run.deleteHWMKiB), mib(run.deleteHeapKB))
		}
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d cloud-shaped Nodes (%s), created without the finalizer; GOMEMLIMIT=%s; %d rounds, median [each round]:\n\n", *cache, shape, *goMemLimit, *memoryRounds)
	fmt.Fprintf(&sb, "| build | back-fill (start → every node has the finalizer) | its CPU time | VmRSS (leading, synced) | VmHWM (peak) | Go heap in use | VmHWM after %[1]d deleted at once | Go heap in use after %[1]d deleted |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n", *memDelete)
	for _, v := range builds {
		col := func(get func(memoryRun) float64, format string) string {
			vals := make([]float64, len(v.runs))
			for i, r := range v.runs {
				vals[i] = get(r)
			}
			sorted := slices.Clone(vals)
			slices.Sort(sorted)
			each := make([]string, len(vals))
			for i, x := range vals {
				each[i] = fmt.Sprintf(format, x)
			}
			return fmt.Sprintf("**"+format+"** [%s]", sorted[len(sorted)/2], strings.Join(each, ", "))
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", v.name,
			col(func(r memoryRun) float64 { return r.backfill.Seconds() }, "%.1f s"),
			col(func(r memoryRun) float64 { return r.backfillCPU.Seconds() }, "%.1f s"),
			col(func(r memoryRun) float64 { return mib(r.rssKiB) }, "%.1f MiB"),
			col(func(r memoryRun) float64 { return mib(r.hwmKiB) }, "%.1f MiB"),
			col(func(r memoryRun) float64 { return mib(r.heapInuseKB) }, "%.1f MiB"),
			col(func(r memoryRun) float64 { return mib(r.deleteHWMKiB) }, "%.1f MiB"),
			col(func(r memoryRun) float64 { return mib(r.deleteHeapKB) }, "%.1f MiB"))
	}
	b.Logf("\n%s", sb.String())
	fmt.Print(sb.String())
	// This build's medians, for make bench-scale's table of targets.
	med := func(get func(memoryRun) float64) float64 {
		vals := make([]float64, len(builds[0].runs))
		for i, r := range builds[0].runs {
			vals[i] = get(r)
		}
		slices.Sort(vals)
		return vals[len(vals)/2]
	}
	b.ReportMetric(med(func(r memoryRun) float64 { return r.backfill.Seconds() }), "backfill-s-median")
	b.ReportMetric(med(func(r memoryRun) float64 { return mib(r.rssKiB) }), "rss-MiB-median")
	b.ReportMetric(med(func(r memoryRun) float64 { return mib(max(r.hwmKiB, r.deleteHWMKiB)) }), "hwm-MiB-median")
}

func mib(kib int) float64 { return float64(kib) / 1024 }

// measureReplica starts the webhook binary bin as the chart would (with
// GOMEMLIMIT), waits until it has back-filled every cache- node and leads,
// samples its memory, deletes -cleanup.memory-delete nodes at once, samples
// it again once they are gone and stops it.
func measureReplica(b *testing.B, cp *harness.ControlPlane, c kubernetes.Interface, name, bin string, args []string) memoryRun {
	b.Helper()
	p, err := harness.StartProcess(cp.Dir, name, bin, args, []string{"GOMEMLIMIT=" + *goMemLimit})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	b.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	hook := &harness.Daemon{Process: p, IP: webhookIP}
	hook.WaitReady(b, 60*time.Second)
	waitMetric(b, hook, "node_cleanup_nodes_with_finalizer", float64(*cache), 15*time.Minute)
	run := memoryRun{backfill: time.Since(start)}
	if u, err := harness.TreeUsage(p.Pid()); err == nil {
		run.backfillCPU = u.CPU
	}
	waitMetric(b, hook, "node_cleanup_leader", 1, 60*time.Second)
	var rss []int
	for range 10 {
		time.Sleep(time.Second)
		rss = append(rss, hook.StatusKiBT(b, "VmRSS"))
	}
	slices.Sort(rss)
	run.rssKiB = rss[len(rss)/2]
	run.hwmKiB = hook.StatusKiBT(b, "VmHWM")
	run.heapInuseKB = int(hook.Metric(b, "go_memstats_heap_inuse_bytes") / 1024)
	if *memDelete > 0 {
		deleteNodes(b, c, "cache-", *memDelete)
		waitMetric(b, hook, "node_cleanup_nodes_total", float64(*memDelete), 10*time.Minute) // cleanups completed
		if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "bench=cache", ResourceVersion: "0"})
			return err == nil && len(l.Items) == *cache-*memDelete, nil
		}); err != nil {
			b.Fatalf("deleted nodes never gone: %v", err)
		}
		run.deleteHWMKiB = hook.StatusKiBT(b, "VmHWM")
		run.deleteHeapKB = int(hook.Metric(b, "go_memstats_heap_inuse_bytes") / 1024)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		b.Fatal(err)
	}
	return run
}

// deleteNodes deletes the n nodes named prefix0.., 32 at a time.
func deleteNodes(b *testing.B, c kubernetes.Interface, prefix string, n int) {
	b.Helper()
	forNodes(b, prefix, n, func(ctx context.Context, name string) error {
		return c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// stripFinalizers removes every finalizer from the n nodes named prefix0..,
// 32 at a time, so that the next replica back-fills them all again.
func stripFinalizers(b *testing.B, c kubernetes.Interface, prefix string, n int) {
	b.Helper()
	forNodes(b, prefix, n, func(ctx context.Context, name string) error {
		_, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return err
	})
}

// forNodes calls do for each of the n nodes named prefix0.., 32 at a time;
// an error fails b.
func forNodes(b *testing.B, prefix string, n int, do func(ctx context.Context, name string) error) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	work := make(chan int)
	var failed atomic.Value
	for range 32 {
		wg.Go(func() {
			for i := range work {
				if err := do(ctx, fmt.Sprintf("%s%d", prefix, i)); err != nil {
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
		b.Fatal(err)
	}
}
