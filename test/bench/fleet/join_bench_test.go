//go:build e2e

package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// joins is how many nodes join, one after the other, for each figure.
const joins = 5

// timeJoins creates joins KWOK nodes named prefix-0, ... one at a time, each
// with an agent process started as its DaemonSet pod would be (cp.StartAgent:
// a token bound to a pod on the node, the chart's RBAC), and returns the
// median time from the Node's creation to the agent's log line that its
// write removing the startup taint returned (the watch event that shows the
// taint gone ends the wait, but reaches this process after the simulated
// fleet's goroutines had their turn). The nodes and agents are removed again.
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
		agent := startAgentAtNice0(b, node)
		_, err = harness.UntaintedAfter(w, harness.StartupTaint.Key, start, 2*time.Minute)
		w.Stop()
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		samples = append(samples, untaintLogged(b, agent).Sub(start))
		if err := agent.Stop(10 * time.Second); err != nil {
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

// untaintLogged is the time of the agent's "startup taint removed" log
// line, waited for: the watch event can reach this process before the
// agent's write returned to it.
func untaintLogged(b *testing.B, agent *harness.Daemon) time.Time {
	b.Helper()
	var at time.Time
	err := wait.PollUntilContextTimeout(b.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		log, err := agent.Log()
		if err != nil {
			return false, err
		}
		for line := range strings.SplitSeq(log, "\n") {
			var rec struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == untaintMsg {
				at = rec.Time
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		b.Fatalf("agent log has no %q line: %v\n%s", untaintMsg, err, agent.Tail(20))
	}
	return at
}

// untaintMsg is the agent's log message when its write removed the startup
// taint.
const untaintMsg = fleet.UntaintMsg

// startAgentAtNice0 starts node's agent process from a thread at nice 0: a
// child inherits the nice value of the thread that forks it, and this
// process's threads may be at 19 (elsewhere).
func startAgentAtNice0(b *testing.B, node harness.Node) *harness.Daemon {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := syscall.Gettid()
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, 0); err != nil {
		b.Fatal(err)
	}
	// Back to the others' value before the thread returns to the pool.
	defer func() { _ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, currentNice) }()
	// Its metrics port is not MetricsPort, which the fleet's shared listener
	// holds on every address (-fleet.shared-listener); nothing scrapes it.
	return cp.StartAgent(b, node, fmt.Sprintf("--check-period=%s", *period),
		"--metrics-bind-address="+net.JoinHostPort(node.IP, strconv.Itoa(joinMetricsPort)))
}

// joinMetricsPort is the joining agents' metrics port.
const joinMetricsPort = harness.MetricsPort + 1

// currentNice is the nice value elsewhere set this process's threads to:
// startAgentAtNice0 puts its thread back to it after the fork.
var currentNice int

// elsewhere lowers the CPU priority of every thread of the given processes to
// nice 19 until the returned func restores them to 0. On this machine the
// fleet's other nodes (the simulated agents in this process, KWOK's kubelets)
// share two cores with the control plane and the joining node's agent; in a
// cluster they run on machines of their own, and only their requests reach
// the API server. The join is measured both ways.
func elsewhere(b *testing.B, pids ...int) (restore func()) {
	b.Helper()
	set := func(nice int) {
		for _, pid := range pids {
			tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
			if err != nil {
				b.Fatal(err)
			}
			for _, t := range tasks {
				tid, _ := strconv.Atoi(t.Name())
				// A thread may exit between the listing and the call.
				_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
			}
		}
	}
	set(19)
	// Only when this process is among them: a thread left at 19 after a
	// join would starve the simulated agents that run on it from then on.
	self := slices.Contains(pids, os.Getpid())
	if self {
		currentNice = 19
	}
	return func() {
		set(0)
		if self {
			currentNice = 0
		}
	}
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
