//go:build e2e

package realnode_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// BenchmarkRealNodeSteady samples, over -realnode.window after every node is
// verified, the agent container's memory working set and CPU from its
// cgroups on each real node, and the resident memory and CPU of the
// cluster's own processes; default values: every check continuous. With
// -realnode.baseline it measures that agent image side by side with the
// local one instead (compareSteady).
func BenchmarkRealNodeSteady(b *testing.B) {
	if *baseline != "" {
		compareSteady(b)
		return
	}
	measureSteady(b, "every check continuous, period 60 s")
}

// BenchmarkRealNodeSteadyBootstrapOnly is the same after helm upgrade to a
// bootstrap-only agent (agent.continuousChecks: []): no rounds after
// verification.
func BenchmarkRealNodeSteadyBootstrapOnly(b *testing.B) {
	ctx := b.Context()
	if err := upgrade(ctx, "--set-json", "agent.continuousChecks=[]"); err != nil {
		b.Fatal(err)
	}
	// The new pods verify nothing (the nodes are verified) and go idle at once.
	time.Sleep(10 * time.Second)
	measureSteady(b, "bootstrap-only")
}

// upgrade upgrades the release with its values plus set, and waits for the
// agents' rollout.
func upgrade(ctx context.Context, set ...string) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	args := append([]string{"upgrade", "kube-node-ready", filepath.Join(root, "charts", "kube-node-ready"), "--namespace", "kube-node-ready", "--reuse-values"}, set...)
	if _, err := c.Helm(ctx, append(args, "--wait", "--timeout", "3m")...); err != nil {
		return err
	}
	_, err = c.Kubectl(ctx, nil, "rollout", "status", "-n", "kube-node-ready", "daemonset/kube-node-ready", "--timeout=3m")
	return err
}

// agentCgroups maps each live real node to the memory cgroup of its running
// agent container, of image when image is not empty. Nodes the join
// benchmark switched off and deleted are not measured.
func agentCgroups(ctx context.Context, image string) (map[string]string, error) {
	pods, err := c.Client.CoreV1().Pods("kube-node-ready").List(ctx, metav1.ListOptions{LabelSelector: "app=kube-node-ready"})
	if err != nil {
		return nil, err
	}
	var live []*harness.RealNode
	for _, n := range c.Nodes {
		if _, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
			live = append(live, n)
		}
	}
	cgroups := map[string]string{}
	for _, p := range pods.Items {
		for _, n := range live {
			if p.Spec.NodeName != n.Name || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 ||
				(image != "" && p.Spec.Containers[0].Image != image) {
				continue
			}
			cg, err := n.ContainerCgroup(string(p.UID), p.Status.ContainerStatuses[0].ContainerID)
			if err != nil {
				return nil, err
			}
			cgroups[n.Name] = cg
		}
	}
	if len(cgroups) != len(live) {
		return nil, fmt.Errorf("agent containers found on %d of %d real nodes", len(cgroups), len(live))
	}
	return cgroups, nil
}

func measureSteady(b *testing.B, mode string) {
	ctx := b.Context()
	cgroups, err := agentCgroups(ctx, "")
	if err != nil {
		b.Fatal(err)
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
	rss := map[string][]int{}
	w, err := sampleAgents(ctx, cgroups, *window, func() {
		for name, p := range components {
			if u, err := harness.TreeUsage(p.Pid()); err == nil {
				rss[name] = append(rss[name], u.RSSKiB)
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(w.workingSet, "agent-ws-p50-MiB")
	b.ReportMetric(w.workingSetMax, "agent-ws-max-MiB")
	b.ReportMetric(w.millicores, "agent-millicores")
	b.Logf("agent container (%s) over %s on %d real nodes: working set p50 %.1f MiB, max %.1f MiB; CPU %.2f millicores (median of nodes)",
		mode, w.elapsed.Round(time.Second), len(cgroups), w.workingSet, w.workingSetMax, w.millicores)

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
		milli := float64(u.CPU-cpuStart[name]) / float64(w.elapsed) * 1000
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

// agentWindow is what the agent containers used over one window: medians
// over every sample of every container, in MiB, and the median CPU of the
// containers.
type agentWindow struct {
	workingSet, workingSetMax float64
	// anon and file are the cgroup's anonymous memory and page cache.
	anon, file float64
	// rss, rssAnon and rssFile are the processes' resident pages.
	rss, rssAnon, rssFile float64
	millicores            float64
	elapsed               time.Duration
	samples               int
}

// sampleAgents reads the containers' cgroups every 5 s for window, calling
// tick at each sample as well.
func sampleAgents(ctx context.Context, cgroups map[string]string, window time.Duration, tick func()) (agentWindow, error) {
	var w agentWindow
	cpuStart := map[string]time.Duration{}
	for node, cg := range cgroups {
		s, err := harness.ReadContainerStats(cg)
		if err != nil {
			return w, err
		}
		cpuStart[node] = s.CPU
	}
	var ws, anon, file, rss, rssAnon, rssFile []float64
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	start := time.Now()
	for time.Since(start) < window {
		for _, cg := range cgroups {
			s, err := harness.ReadContainerStats(cg)
			if err != nil {
				return w, err
			}
			ws = append(ws, mib(s.WorkingSet))
			anon, file = append(anon, mib(s.Anon)), append(file, mib(s.File))
			rss, rssAnon, rssFile = append(rss, mib(s.RSS)), append(rssAnon, mib(s.RSSAnon)), append(rssFile, mib(s.RSSFile))
		}
		tick()
		select {
		case <-ctx.Done():
			return w, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	w.elapsed = time.Since(start)
	var cpu []float64
	for node, cg := range cgroups {
		s, err := harness.ReadContainerStats(cg)
		if err != nil {
			return w, err
		}
		cpu = append(cpu, float64(s.CPU-cpuStart[node])/float64(w.elapsed)*1000)
	}
	w.samples = len(ws)
	w.workingSet, w.workingSetMax = median(ws), slices.Max(ws)
	w.anon, w.file = median(anon), median(file)
	w.rss, w.rssAnon, w.rssFile = median(rss), median(rssAnon), median(rssFile)
	w.millicores = median(cpu)
	return w, nil
}

// median is the middle value of v, the mean of the two middle ones when v
// has an even length.
func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}
