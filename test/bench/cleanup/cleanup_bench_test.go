//go:build e2e

// Package cleanup benchmarks node cleanup with the real webhook binary at its
// default settings (16 workers, client QPS 200 / burst 400) against the real
// kube-apiserver: how long 500 nodes (-cleanup.burst) deleted at once take
// to disappear with one 200 ms plugin (and, with -cleanup.storage, the
// volumeattachments and local-volumes plugins before it), the API requests
// per deleted node by verb and resource (apiserver_request_total, less the
// benchmark's own). BenchmarkWebhookMemory measures the webhook's memory
// and back-fill time with -cleanup.cache-nodes cloud-shaped nodes
// (nodeshape_test.go); BenchmarkRemediationScan times the remediation scans
// with as many unverified nodes cached. It prints the "## Cleanup" section's
// tables for docs/benchmarks.md; nothing here asserts on time.
package cleanup

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	webhookIP  = "10.213.0.25"
	pxAddr     = "10.213.0.35:9001"
	rounds     = 3
	pluginTime = 200 * time.Millisecond
)

// slowPortworx answers every decommission after pluginTime: the one 200 ms plugin.
type slowPortworx struct{ deletes atomic.Int64 }

func (p *slowPortworx) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster/enumerate":
		// Every node is known to Portworx under its own name.
		fmt.Fprint(w, `{"nodes":[`)
		for i := range *burst {
			if i > 0 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, `{"id":"px-%d","scheduler_node_name":"burst-%d"}`, i, i)
		}
		fmt.Fprint(w, `]}`)
	case r.Method == http.MethodDelete:
		time.Sleep(pluginTime)
		p.deletes.Add(1)
	default:
		http.NotFound(w, r)
	}
}

// baseline is another webhook build (an older one) whose mass deletion runs
// side by side with this one's, alternating rounds on one control plane.
var baseline = flag.String("cleanup.baseline", "", "another kube-node-ready-webhook binary to run side by side in the mass deletion, alternating rounds")

// The fleet sizes; make bench-scale runs this benchmark at 1 000 and 10 000.
var (
	burst = flag.Int("cleanup.burst", 500, "nodes deleted at once in each round")
	cache = flag.Int("cleanup.cache-nodes", 5000, "cloud-shaped nodes the memory and remediation benchmarks create")
)

func BenchmarkCleanup(b *testing.B) {
	for range b.N {
		benchCleanup(b)
	}
}

// variant is one webhook build under test.
type variant struct {
	name, bin string
	times     []time.Duration
	// statusWrites per cleaned-up node, per round.
	statusWrites []float64
	// requests per deleted node by verb and resource, per round.
	requests []map[request]float64
}

func benchCleanup(b *testing.B) {
	cp := harness.StartT(b, harness.Options{NoDNS: true})
	ctx := context.Background()
	px := &slowPortworx{}
	ln, err := net.Listen("tcp", pxAddr)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: px, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// Two plugins, so the cleanup status annotation has progress to show:
	// the 200 ms portworx decommission and the log plugin; with
	// -cleanup.storage the storage plugins before portworx.
	plugins := "plugins:\n  log: {}\n  portworx:\n    endpoint: http://" + pxAddr + "\n"
	if *storage {
		plugins += "    after: [volumeattachments, local-volumes]\n" + storagePlugins()
	}
	config := filepath.Join(cp.Dir, "cleanup.yaml")
	if err := os.WriteFile(config, []byte(plugins), 0o644); err != nil {
		b.Fatal(err)
	}
	fast := rest.CopyConfig(cp.Config)
	fast.QPS, fast.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(fast)
	if err != nil {
		b.Fatal(err)
	}
	if *storage {
		setupStorage(b, client)
	}
	args := []string{"--kubeconfig=" + cp.Kubeconfig, "--namespace=kube-system", "--webhook-config-name=", "--config=" + config}

	variants := []*variant{{name: "this build", bin: harness.BuiltBinary(b, harness.WebhookBinary)}}
	if *baseline != "" {
		variants = append(variants, &variant{name: *baseline, bin: *baseline})
	}
	for round := range rounds * len(variants) {
		v := variants[round%len(variants)]
		hook := cp.StartWebhookBinary(b, v.bin, fmt.Sprintf("webhook-%d", round), webhookIP, args...)
		hook.WaitReady(b, 30*time.Second)
		createNodes(b, client, "burst-", *burst, false, true)
		if *storage {
			createStorage(b, client, "burst-", *burst)
		}
		waitMetric(b, hook, "node_cleanup_nodes_with_finalizer", float64(*burst), 60*time.Second)
		waitMetric(b, hook, "node_cleanup_leader", 1, 60*time.Second)
		before := px.deletes.Load()
		requestsBefore := apiserverRequests(b, client)
		polls := 0
		start := time.Now()
		if err := client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "bench=burst"}); err != nil {
			b.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
			polls++
			l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "bench=burst"})
			return err == nil && len(l.Items) == 0, nil
		}); err != nil {
			b.Fatalf("round %d: nodes never all gone: %v", round, err)
		}
		d := time.Since(start)
		// The benchmark's own requests in that window: the deletion and its polls.
		own := map[request]float64{{"DELETECOLLECTION", "nodes"}: 1, {"LIST", "nodes"}: float64(polls)}
		reqs := perNode(requestsBefore, apiserverRequests(b, client), own, *burst)
		if got := px.deletes.Load() - before; got != int64(*burst) {
			b.Fatalf("round %d: %d decommissions for %d nodes", round, got, *burst)
		}
		writes, err := hook.TryMetric("node_cleanup_status_writes_total")
		if err != nil {
			writes = 0 // a build from before the status annotation
		}
		v.times = append(v.times, d)
		v.statusWrites = append(v.statusWrites, writes/float64(*burst))
		v.requests = append(v.requests, reqs)
		var all float64
		var parts []string
		for r, n := range reqs {
			all += n
			parts = append(parts, fmt.Sprintf("%s %.2f", r, n))
		}
		slices.Sort(parts)
		b.Logf("round %d (%s): %d nodes gone in %s, %.2f status writes per node, %.2f API requests per node (%s)", round, v.name, *burst, d.Round(time.Millisecond),
			writes/float64(*burst), all, strings.Join(parts, ", "))
		if *storage {
			checkAndClearStorage(b, client)
		}
		if err := hook.Stop(10 * time.Second); err != nil {
			b.Fatal(err)
		}
		// The Lease of the stopped replica is released; the next one leads at once.
	}

	var sb strings.Builder
	what := fmt.Sprintf("portworx (%s) + log", pluginTime)
	if *storage {
		what = fmt.Sprintf("volumeattachments + local-volumes (one each per node) + portworx (%s) + log", pluginTime)
	}
	fmt.Fprintf(&sb, "\n| %d nodes deleted at once (DeleteCollection), %s | round 1 | round 2 | round 3 | median | status writes per node |\n| --- | --- | --- | --- | --- | --- |\n", *burst, what)
	for _, v := range variants {
		sorted := slices.Clone(v.times)
		slices.Sort(sorted)
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | **%s** | %.2f |\n", v.name, v.times[0].Round(10*time.Millisecond), v.times[1].Round(10*time.Millisecond),
			v.times[2].Round(10*time.Millisecond), sorted[len(sorted)/2].Round(10*time.Millisecond), slices.Max(v.statusWrites))
	}
	if len(variants) == 2 {
		m := func(v *variant) float64 { s := slices.Clone(v.times); slices.Sort(s); return s[len(s)/2].Seconds() }
		fmt.Fprintf(&sb, "\nRatio of medians, this build to %s: **%.3f**.\n", variants[1].name, m(variants[0])/m(variants[1]))
	}
	sb.WriteString(requestTable(variants, *burst))

	b.Logf("\n%s", sb.String())
	fmt.Print(sb.String())
	sorted := slices.Clone(variants[0].times)
	slices.Sort(sorted)
	b.ReportMetric(sorted[len(sorted)/2].Seconds(), "burst-gone-s-median")
}

// createNodes creates n Nodes, with our finalizer when finalizer is set, 32
// at a time; realistic ones carry the labels, annotations and status a cloud
// node has. Each tweak then changes the node before it is created.
func createNodes(b *testing.B, c kubernetes.Interface, prefix string, n int, realistic, finalizer bool, tweaks ...func(*corev1.Node)) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	work := make(chan int)
	var failed atomic.Value
	for range 32 {
		wg.Go(func() {
			for i := range work {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
					Name:   fmt.Sprintf("%s%d", prefix, i),
					Labels: map[string]string{"bench": strings.TrimSuffix(prefix, "-")},
				}}
				if finalizer {
					node.Finalizers = []string{harness.Finalizer}
				}
				if realistic {
					decorate(node, i)
				}
				for _, tweak := range tweaks {
					tweak(node)
				}
				created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
				if err != nil {
					failed.Store(err)
					continue
				}
				if realistic {
					created.Status = node.Status
					if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
						failed.Store(err)
					}
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
		b.Fatalf("create nodes: %v", err)
	}
}

func waitMetric(b *testing.B, p *harness.Daemon, name string, want float64, timeout time.Duration) {
	b.Helper()
	var got float64
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if exited, _ := p.Exited(); exited {
			return false, p.ExitError()
		}
		v, err := p.TryMetric(name)
		got = v
		return err == nil && v >= want, nil
	}); err != nil {
		b.Fatalf("%s = %v, want %v: %v", name, got, want, err)
	}
}
