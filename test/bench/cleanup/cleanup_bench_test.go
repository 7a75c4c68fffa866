//go:build e2e

// Package cleanup benchmarks node cleanup with the real webhook binary at its
// default settings (16 workers, client QPS 200 / burst 400) against the real
// kube-apiserver: how long 500 nodes (-cleanup.burst) deleted at once take
// to disappear with one 200 ms plugin (and, with -cleanup.storage, the
// volumeattachments and local-volumes plugins before it), the API requests
// per deleted node by verb and resource (apiserver_request_total, less the
// benchmark's own), and the watcher's resident memory with
// 5 000 realistic nodes (-cleanup.cache-nodes) in its cache, which with
// -cleanup.backfill it back-fills first; BenchmarkRemediationScan times the
// remediation scans with as many unverified nodes cached. It prints the "## Cleanup" section's tables for
// docs/benchmarks.md; nothing here asserts on time.
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
	"k8s.io/apimachinery/pkg/api/resource"
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
	burst    = flag.Int("cleanup.burst", 500, "nodes deleted at once in each round")
	cache    = flag.Int("cleanup.cache-nodes", 5000, "realistic nodes the memory replica caches")
	backfill = flag.Bool("cleanup.backfill", false, "create the cached nodes without the finalizer, so the memory replica back-fills them, and time that")
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

	// Memory: a fresh replica lists -cleanup.cache-nodes realistic nodes.
	createNodes(b, client, "cache-", *cache, true, !*backfill)
	started := time.Now()
	mem := cp.StartWebhook(b, "webhook-mem", webhookIP, args...)
	mem.WaitReady(b, 30*time.Second)
	waitMetric(b, mem, "node_cleanup_nodes_with_finalizer", float64(*cache), 15*time.Minute)
	filled := time.Since(started)
	waitMetric(b, mem, "node_cleanup_leader", 1, 60*time.Second)
	var rss []int
	for range 10 {
		time.Sleep(time.Second)
		rss = append(rss, mem.StatusKiBT(b, "VmRSS"))
	}
	hwm := mem.StatusKiBT(b, "VmHWM")
	sizes := nodeSizes(b, client)

	slices.Sort(rss)
	mib := func(kib int) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }
	if *backfill {
		fmt.Fprintf(&sb, "\nBack-fill: %d nodes created without the finalizer while no webhook ran all carry it %.1f s after the replica started.\n", *cache, filled.Seconds())
	}
	fmt.Fprintf(&sb, "\n| watcher with %d nodes cached | VmRSS median of 10 samples | VmRSS max | VmHWM |\n| --- | --- | --- | --- |\n", *cache)
	fmt.Fprintf(&sb, "| webhook process (leader, informer synced) | **%s** | %s | %s |\n", mib(rss[len(rss)/2]), mib(rss[len(rss)-1]), mib(hwm))
	fmt.Fprintf(&sb, "\nA cached-node's full object is %s as JSON (%d labels, %d annotations, %d images, %d conditions).\n", sizes.json, sizes.labels, sizes.annotations, sizes.images, sizes.conditions)
	b.Logf("\n%s", sb.String())
	fmt.Print(sb.String())
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

// decorate gives node what an EKS/GKE node typically carries.
func decorate(node *corev1.Node, i int) {
	name := node.Name
	zone := []string{"a", "b", "c"}[i%3]
	for k, v := range map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "m6i.2xlarge", "beta.kubernetes.io/instance-type": "m6i.2xlarge",
		"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": "eu-west-1" + zone,
		"failure-domain.beta.kubernetes.io/region": "eu-west-1", "failure-domain.beta.kubernetes.io/zone": "eu-west-1" + zone,
		"karpenter.sh/nodepool": "general-purpose", "karpenter.sh/capacity-type": "on-demand",
		"karpenter.k8s.aws/instance-family": "m6i", "karpenter.k8s.aws/instance-cpu": "8", "karpenter.k8s.aws/instance-memory": "32768",
		"node-ready/verified": "true", "topology.ebs.csi.aws.com/zone": "eu-west-1" + zone,
	} {
		node.Labels[k] = v
	}
	node.Annotations = map[string]string{
		"node.alpha.kubernetes.io/ttl":                           "0",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		"alpha.kubernetes.io/provided-node-ip":                   fmt.Sprintf("10.0.%d.%d", i/250, i%250),
		"karpenter.sh/nodepool-hash":                             "4012513481623584108",
		"karpenter.k8s.aws/ec2nodeclass-hash":                    "15616957348189460630",
		"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":"i-0%015x","efs.csi.aws.com":"i-0%015x"}`, i, i),
	}
	q := resource.MustParse
	node.Spec.ProviderID = fmt.Sprintf("aws:///eu-west-1%s/i-0%015x", zone, i)
	node.Spec.PodCIDR = fmt.Sprintf("100.64.%d.0/24", i%250)
	st := &node.Status
	st.Capacity = corev1.ResourceList{"cpu": q("8"), "memory": q("32080868Ki"), "pods": q("58"), "ephemeral-storage": q("104845292Ki"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0")}
	st.Allocatable = corev1.ResourceList{"cpu": q("7910m"), "memory": q("31064036Ki"), "pods": q("58"), "ephemeral-storage": q("95551679124"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0")}
	now := metav1.Now()
	for _, c := range []struct{ t, s, r string }{
		{"MemoryPressure", "False", "KubeletHasSufficientMemory"}, {"DiskPressure", "False", "KubeletHasNoDiskPressure"},
		{"PIDPressure", "False", "KubeletHasSufficientPID"}, {"Ready", "True", "KubeletReady"},
	} {
		st.Conditions = append(st.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(c.t), Status: corev1.ConditionStatus(c.s), Reason: c.r, Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now})
	}
	st.Addresses = []corev1.NodeAddress{{Type: "InternalIP", Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250)}, {Type: "Hostname", Address: name}, {Type: "InternalDNS", Address: name + ".eu-west-1.compute.internal"}}
	st.NodeInfo = corev1.NodeSystemInfo{MachineID: fmt.Sprintf("ec2%029x", i), SystemUUID: fmt.Sprintf("ec2%029x", i), BootID: fmt.Sprintf("%032x", i), KernelVersion: "6.1.112-124.190.amzn2023.x86_64", OSImage: "Amazon Linux 2023.6.20241031", ContainerRuntimeVersion: "containerd://1.7.22", KubeletVersion: "v1.36.3-eks-7f9249a", OperatingSystem: "linux", Architecture: "amd64"}
	for j := range 20 {
		st.Images = append(st.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/image-%d@sha256:%064x", j, j), fmt.Sprintf("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/image-%d:v1.%d.0", j, j)}, SizeBytes: int64(10_000_000 + j*1_000_000)})
	}
}

type sizes struct {
	json                                    string
	labels, annotations, images, conditions int
}

func nodeSizes(b *testing.B, c kubernetes.Interface) sizes {
	b.Helper()
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/cache-0").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	n, err := c.CoreV1().Nodes().Get(context.Background(), "cache-0", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return sizes{json: fmt.Sprintf("%.1f KiB", float64(len(raw))/1024), labels: len(n.Labels), annotations: len(n.Annotations), images: len(n.Status.Images), conditions: len(n.Status.Conditions)}
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
