//go:build e2e

// Package realnode_test measures the chart installed with helm on real nodes
// (kubelet, containerd, runc, CNI, kube-proxy) with its default values but
// the local images: how long a joining node waits for the agent, what the
// agent container costs on every node, and what the test cluster itself
// costs.
//
//	make bench
//	go test -tags e2e -run '^$' -bench . -benchtime 1x ./test/bench/realnode/
//	go test -tags e2e -run '^$' -bench 'RealNodeJoin$' -benchtime 1x ./test/bench/realnode/ -args -realnode.ip-families=IPv6
package realnode_test

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	joins  = flag.Int("realnode.joins", 12, "real nodes joined one after another in the join benchmark")
	window = flag.Duration("realnode.window", 3*time.Minute, "measuring window of the steady-state benchmark")
	// baseline and rounds: see compareSteady.
	baseline = flag.String("realnode.baseline", "", "OCI tarball of another agent image, under another tag, that BenchmarkRealNodeSteady measures side by side with the local one")
	rounds   = flag.Int("realnode.rounds", 3, "windows per image when BenchmarkRealNodeSteady compares with -realnode.baseline, alternating")
	families = flag.String("realnode.ip-families", "IPv4", "IP families of the cluster, primary first: IPv4, IPv6, IPv4,IPv6 or IPv6,IPv4 (harness.Options.IPFamilies)")
	nodes    = flag.Int("realnode.nodes", 2, "real nodes the cluster starts with")
	timings  = flag.String("realnode.kubelet-timings", "harness", "the kubelets' status and sync timings: harness (status posted every 2 s, pods synced every 10 s) or default (the kubelet's own: status posted on change or every 5 minutes, pods synced every minute; harness.ClusterOptions.KubeletDefaultTimings)")
	register = flag.String("realnode.register-taint", "flag", "how a joining node gets its startup taint: flag (kubelet --register-with-taints), admission (no flag: the webhook adds it at creation, webhook.startupTaint.inject) or alternate (one join each way, in turn, each reported apart)")
)

var c *harness.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if err := harness.EnterNetworkNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	var err error
	// The audit log: BenchmarkAgentBesideKubelet counts each client's requests.
	opts := harness.ClusterOptions{Options: harness.Options{Logf: log.Printf, IPFamilies: ipFamilies(), AuditLog: true}, Nodes: *nodes, ProjectImages: true}
	switch *timings {
	case "harness":
	case "default":
		opts.KubeletDefaultTimings = true
	default:
		fmt.Fprintf(os.Stderr, "-realnode.kubelet-timings=%s: want harness or default\n", *timings)
		os.Exit(2)
	}
	if *baseline != "" {
		opts.Images = []string{*baseline}
	}
	c, err = harness.StartCluster(ctx, opts)
	if err == nil {
		err = install(ctx)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		if c != nil {
			c.Stop()
		}
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "cluster logs:\n%s", c.Logs(30))
	}
	c.Stop()
	os.Exit(code)
}

// ipFamilies are the families -realnode.ip-families names.
func ipFamilies() []corev1.IPFamily {
	var fams []corev1.IPFamily
	for _, f := range strings.Split(*families, ",") {
		fams = append(fams, corev1.IPFamily(strings.TrimSpace(f)))
	}
	return fams
}

// install installs the chart with default values (but the local images).
func install(ctx context.Context) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	v, err := c.LocalImageValues("", "")
	if err != nil {
		return err
	}
	values := filepath.Join(c.Dir, "values.yaml")
	if err := os.WriteFile(values, []byte(v), 0o644); err != nil {
		return err
	}
	_, err = c.Helm(ctx, "install", "kube-node-ready", filepath.Join(root, "charts", "kube-node-ready"),
		"--namespace", "kube-node-ready", "--create-namespace", "--values", values, "--wait", "--timeout", "3m")
	return err
}

func tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == harness.StartupTaint.Key || t.Key == harness.UnhealthyTaint.Key
	})
}

// BenchmarkRealNodeJoin joins -realnode.joins real nodes one at a time
// (registered with the kubelet's taint flag, or with none and tainted by
// admission: -realnode.register-taint) and measures, from the watch, the time from the Node's creation (the first
// event that shows it) to the event that shows its startup taint gone. Each
// node is switched off and deleted (its cleanup runs) before the next joins,
// so every join meets the same two-node cluster.
func BenchmarkRealNodeJoin(b *testing.B) {
	ctx := b.Context()
	samples := map[string][]time.Duration{}
	fromKubelet := map[string][]time.Duration{}
	var ways []string
	for i := range *joins {
		way := *register
		if way == "alternate" {
			way = []string{"flag", "admission"}[i%2]
		}
		if !slices.Contains(ways, way) {
			ways = append(ways, way)
		}
		opts := harness.RealNodeOptions{NoWait: true}
		if way == "admission" {
			opts.Taints = []corev1.Taint{}
		}
		w, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		started := time.Now()
		n, err := c.AddNode(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		var seen time.Time
		deadline := time.After(3 * time.Minute)
	events:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					b.Fatal("watch closed")
				}
				node, isNode := ev.Object.(*corev1.Node)
				if !isNode || node.Name != n.Name || ev.Type == watch.Deleted {
					continue
				}
				if seen.IsZero() {
					seen = time.Now()
					if !tainted(node) {
						b.Fatalf("node %s (%s) first seen without its startup taint: the join would not be gated", n.Name, way)
					}
				}
				if !tainted(node) {
					samples[way] = append(samples[way], time.Since(seen))
					fromKubelet[way] = append(fromKubelet[way], time.Since(started))
					break events
				}
			case <-deadline:
				b.Fatalf("node %s not verified within 3 minutes", n.Name)
			}
		}
		w.Stop()
		if err := n.Stop(); err != nil {
			b.Logf("stop %s: %v", n.Name, err)
		}
		if err := c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			b.Fatalf("node %s not gone after deletion: %v", n.Name, err)
		}
	}
	for _, way := range ways {
		s, k := samples[way], fromKubelet[way]
		p50, p95 := percentile(s, 50), percentile(s, 95)
		if len(ways) == 1 {
			b.ReportMetric(p50.Seconds(), "p50-s")
			b.ReportMetric(p95.Seconds(), "p95-s")
		} else {
			b.ReportMetric(p50.Seconds(), way+"-p50-s")
		}
		b.Logf("%s, startup taint by %s: %d joins, Node creation -> startup taint removed: p50 %s, p95 %s, max %s; from the node's first process: p50 %s, p95 %s",
			*families, way, len(s), p50.Round(time.Millisecond), p95.Round(time.Millisecond), percentile(s, 100).Round(time.Millisecond),
			percentile(k, 50).Round(time.Millisecond), percentile(k, 95).Round(time.Millisecond))
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
