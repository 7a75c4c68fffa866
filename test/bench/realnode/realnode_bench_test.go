//go:build e2e

// Package realnode_test measures the chart installed with helm on real nodes
// (kubelet, containerd, runc, CNI, kube-proxy) with its default values but
// the local images: how long a joining node waits for the agent, what the
// agent container costs on every node, and what the test cluster itself
// costs.
//
//	make bench
//	go test -tags e2e -run '^$' -bench . -benchtime 1x ./test/bench/realnode/
package realnode_test

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
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
	c, err = harness.StartCluster(ctx, harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, ProjectImages: true})
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
		return t.Key == harness.StartupTaint.Key || t.Key == "node-ready/unhealthy"
	})
}

// BenchmarkRealNodeJoin joins -realnode.joins real nodes one at a time and
// measures, from the watch, the time from the Node's creation (the first
// event that shows it) to the event that shows its startup taint gone. Each
// node is switched off and deleted (its cleanup runs) before the next joins,
// so every join meets the same two-node cluster.
func BenchmarkRealNodeJoin(b *testing.B) {
	ctx := b.Context()
	var samples []time.Duration
	var fromKubelet []time.Duration
	for range *joins {
		w, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		started := time.Now()
		n, err := c.AddNode(ctx, harness.RealNodeOptions{NoWait: true})
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
				}
				if !tainted(node) {
					samples = append(samples, time.Since(seen))
					fromKubelet = append(fromKubelet, time.Since(started))
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
	p50, p95 := percentile(samples, 50), percentile(samples, 95)
	b.ReportMetric(p50.Seconds(), "p50-s")
	b.ReportMetric(p95.Seconds(), "p95-s")
	b.Logf("%d joins, Node creation -> startup taint removed: p50 %s, p95 %s, max %s; from the node's first process: p50 %s, p95 %s",
		len(samples), p50.Round(time.Millisecond), p95.Round(time.Millisecond), percentile(samples, 100).Round(time.Millisecond),
		percentile(fromKubelet, 50).Round(time.Millisecond), percentile(fromKubelet, 95).Round(time.Millisecond))
}

// BenchmarkRealNodeSteady samples, over -realnode.window after every node is
// verified, the agent container's memory working set and CPU from its
// cgroups on each real node, and the resident memory and CPU of the
// cluster's own processes; default values: every check continuous.
func BenchmarkRealNodeSteady(b *testing.B) { measureSteady(b, "every check continuous, period 60 s") }

// BenchmarkRealNodeSteadyBootstrapOnly is the same after helm upgrade to a
// bootstrap-only agent (agent.continuousChecks: []): no rounds after
// verification.
func BenchmarkRealNodeSteadyBootstrapOnly(b *testing.B) {
	ctx := b.Context()
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Helm(ctx, "upgrade", "kube-node-ready", filepath.Join(root, "charts", "kube-node-ready"), "--namespace", "kube-node-ready",
		"--reuse-values", "--set-json", "agent.continuousChecks=[]", "--wait", "--timeout", "3m"); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, nil, "rollout", "status", "-n", "kube-node-ready", "daemonset/kube-node-ready", "--timeout=3m"); err != nil {
		b.Fatal(err)
	}
	// The new pods verify nothing (the nodes are verified) and go idle at once.
	time.Sleep(10 * time.Second)
	measureSteady(b, "bootstrap-only")
}

func measureSteady(b *testing.B, mode string) {
	ctx := b.Context()
	pods, err := c.Client.CoreV1().Pods("kube-node-ready").List(ctx, metav1.ListOptions{LabelSelector: "app=kube-node-ready"})
	if err != nil {
		b.Fatal(err)
	}
	// Nodes the join benchmark switched off and deleted are not measured.
	var live []*harness.RealNode
	for _, n := range c.Nodes {
		if _, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
			live = append(live, n)
		}
	}
	cgroups := map[string]string{}
	for _, p := range pods.Items {
		for _, n := range live {
			if p.Spec.NodeName != n.Name || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 {
				continue
			}
			cg, err := n.ContainerCgroup(string(p.UID), p.Status.ContainerStatuses[0].ContainerID)
			if err != nil {
				b.Fatal(err)
			}
			cgroups[n.Name] = cg
		}
	}
	if len(cgroups) != len(live) {
		b.Fatalf("agent containers found on %d of %d real nodes", len(cgroups), len(live))
	}
	components := c.Components()
	cpuStart := map[string]time.Duration{}
	for name, p := range components {
		u, err := harness.TreeUsage(p.Pid())
		if err != nil {
			b.Fatal(err)
		}
		cpuStart[name] = u.CPU
	}
	agentCPUStart := map[string]time.Duration{}
	for node, cg := range cgroups {
		_, cpu, err := harness.ContainerMemory(cg)
		if err != nil {
			b.Fatal(err)
		}
		agentCPUStart[node] = cpu
	}
	start := time.Now()
	var workingSets []float64
	rss := map[string][]int{}
	for time.Since(start) < *window {
		for _, cg := range cgroups {
			ws, _, err := harness.ContainerMemory(cg)
			if err != nil {
				b.Fatal(err)
			}
			workingSets = append(workingSets, float64(ws)/(1<<20))
		}
		for name, p := range components {
			if u, err := harness.TreeUsage(p.Pid()); err == nil {
				rss[name] = append(rss[name], u.RSSKiB)
			}
		}
		select {
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
	elapsed := time.Since(start)
	var agentCPU []float64
	for node, cg := range cgroups {
		_, cpu, err := harness.ContainerMemory(cg)
		if err != nil {
			b.Fatal(err)
		}
		agentCPU = append(agentCPU, float64(cpu-agentCPUStart[node])/float64(elapsed)*1000)
	}
	sort.Float64s(workingSets)
	sort.Float64s(agentCPU)
	b.ReportMetric(workingSets[len(workingSets)/2], "agent-ws-p50-MiB")
	b.ReportMetric(workingSets[len(workingSets)-1], "agent-ws-max-MiB")
	b.ReportMetric(agentCPU[len(agentCPU)/2], "agent-millicores")
	b.Logf("agent container (%s) over %s on %d real nodes: working set p50 %.1f MiB, max %.1f MiB; CPU %.2f millicores (median of nodes)",
		mode, elapsed.Round(time.Second), len(cgroups), workingSets[len(workingSets)/2], workingSets[len(workingSets)-1], agentCPU[len(agentCPU)/2])

	var names []string
	for name := range rss {
		names = append(names, name)
	}
	sort.Strings(names)
	var totalMiB, totalMilli float64
	var lines []string
	for _, name := range names {
		s := rss[name]
		sort.Ints(s)
		mib := float64(s[len(s)/2]) / 1024
		u, err := harness.TreeUsage(components[name].Pid())
		if err != nil {
			continue
		}
		milli := float64(u.CPU-cpuStart[name]) / float64(elapsed) * 1000
		totalMiB += mib
		totalMilli += milli
		lines = append(lines, fmt.Sprintf("%-28s RSS %6.1f MiB  CPU %6.1f millicores", name, mib, milli))
	}
	b.ReportMetric(totalMiB, "cluster-RSS-MiB")
	b.ReportMetric(totalMilli, "cluster-millicores")
	// Printed, not logged: the testing package cuts long benchmark logs.
	fmt.Printf("cluster's own processes (%s; median RSS incl. children; CPU over the window):\n%s\ntotal: RSS %.0f MiB, CPU %.0f millicores\n",
		mode, strings.Join(lines, "\n"), totalMiB, totalMilli)
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
