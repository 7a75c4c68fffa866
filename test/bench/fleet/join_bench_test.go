//go:build e2e

package fleet_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// joins is how many nodes join, one after the other, for each figure.
const joins = 5

// timeJoins creates joins KWOK nodes named prefix-0, ... one at a time, each
// with a simulated agent started as its DaemonSet pod would be (token,
// client, then the agent), and returns the median time from the Node's
// creation to the watch event that shows its startup taint gone. The nodes
// and agents are removed again.
func timeJoins(b *testing.B, prefix string) time.Duration {
	b.Helper()
	ctx := b.Context()
	var samples []time.Duration
	for i := range joins {
		name := fmt.Sprintf("%s-%d", prefix, i)
		w, err := cp.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		node, err := fleet.CreateKWOKNode(ctx, cp, name)
		if err != nil {
			b.Fatal(err)
		}
		f := fleet.New(cp, fleet.Options{Args: []string{fmt.Sprintf("--check-period=%s", *period)}})
		if err := f.Start(ctx, node); err != nil {
			b.Fatal(err)
		}
		d, err := harness.UntaintedAfter(w, harness.StartupTaint.Key, start, 2*time.Minute)
		w.Stop()
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		samples = append(samples, d)
		if err := f.Stop(); err != nil {
			b.Fatal(err)
		}
		if err := cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(samples)
	logf(b, "%s: Node created → startup taint gone, %d joins: median %s (min %s, max %s)", prefix, joins,
		samples[len(samples)/2].Round(time.Millisecond), samples[0].Round(time.Millisecond), samples[len(samples)-1].Round(time.Millisecond))
	return samples[len(samples)/2]
}

// timeStatus runs `kubectl node-ready status` against the plane and returns
// its wall time and peak resident memory (GNU time's: the rusage Go reads
// for a child counts the parent's pages it was forked with).
func timeStatus(b *testing.B) (time.Duration, float64) {
	b.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/time", "-f", "maxrss_kib=%M", filepath.Join(root, "bin", "kubectl-node_ready"), "status", "--kubeconfig", cp.Kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("kubectl node-ready status: %v: %s", err, stderr.String())
	}
	_, kib, _ := strings.Cut(stderr.String(), "maxrss_kib=")
	maxRSS, err := strconv.ParseFloat(strings.TrimSpace(kib), 64)
	if err != nil {
		b.Fatalf("peak RSS of kubectl node-ready status: %q: %v", stderr.String(), err)
	}
	maxRSS /= 1024
	logf(b, "kubectl node-ready status: %s, peak RSS %.1f MiB, %d lines of output", d.Round(time.Millisecond), maxRSS, strings.Count(string(out), "\n"))
	return d, maxRSS
}

// BenchmarkFleetStatus times `kubectl node-ready status` over -fleet.nodes
// nodes (carrying the startup taint, no agents), three runs.
func BenchmarkFleetStatus(b *testing.B) {
	if _, err := fleet.CreateKWOKNodes(b.Context(), cp, "status", *nodeCount, *parallel); err != nil {
		b.Fatal(err)
	}
	var times []time.Duration
	var rss float64
	for range 3 {
		d, m := timeStatus(b)
		times = append(times, d)
		rss = max(rss, m)
	}
	slices.Sort(times)
	b.ReportMetric(times[1].Seconds(), "status-s-median")
	b.ReportMetric(rss, "status-MiB-max")
}
