//go:build e2e

package fleet_test

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	nodeCount    = flag.Int("fleet.nodes", 10000, "KWOK nodes, each with a simulated agent")
	window       = flag.Duration("fleet.window", 3*time.Minute, "measuring window of each phase")
	settle       = flag.Duration("fleet.settle", 70*time.Second, "wait after all nodes are verified before measuring")
	period       = flag.Duration("fleet.period", time.Minute, "the agents' --check-period")
	parallel     = flag.Int("fleet.parallel", 32, "nodes and agents set up at once")
	outage       = flag.Bool("fleet.dns-outage", true, "after the steady state, stop DNS and measure the re-taint storm")
	outages      = flag.Int("fleet.dns-outages", 1, "with -fleet.dns-outage: how many DNS outages in a row, each after the fleet is steady again; the recovery's figures are reported as their medians")
	kubeletsOnly = flag.Bool("fleet.kubelets-only", false, "measure the KWOK fleet without agents and stop: what the kubelets' heartbeats alone cost this control plane")
	restarts     = flag.Int("fleet.rollout", 50, "after the steady state, restart this many agents' pods (their endpoints not ready, then ready) and measure the EndpointSlice watch fan-out; 0: none")
	profile      = flag.String("fleet.apiserver-profile", "", "write kube-apiserver's CPU profiles of the heartbeats' and the agents' windows, and its heap profiles at their ends, to this path prefix (-kubelets.pprof, -agents.pprof, -kubelets-heap.pprof, -agents-heap.pprof)")
	windows      = flag.Int("fleet.windows", 1, "measure the heartbeats and the agents in this many consecutive windows each and take the window of median API server CPU")
	bracket      = flag.Bool("fleet.heartbeats-after", false, "after the agents' windows, stop the agents and measure the heartbeats again: the agents' added CPU is then taken against the mean of the heartbeats before and after them, so the API server's drift over the run cancels out; the run ends there (no joins, rollout or DNS outage)")
	extraWatch   = flag.Bool("fleet.extra-node-watch", false, "with -fleet.heartbeats-after: after the agents' windows, open one more watch of its own Node per agent over the agent's own connection, as the agent's node view holds one, and measure again: what the agent's own-node watch costs the API server")
	shared       = flag.Bool("fleet.shared-listener", true, "serve every simulated agent's metrics port from one listener (fleet.Options.SharedListener): one open file per agent instead of two")
)

var cp *harness.ControlPlane

// fleetPrefix names the fleet's nodes: kwok-0, kwok-1, ...
const fleetPrefix = "kwok"

func TestMain(m *testing.M) {
	flag.Parse()
	if *extraWatch && !*bracket {
		log.Fatal("-fleet.extra-node-watch needs -fleet.heartbeats-after: it runs between the agents' windows and the heartbeats' measured again")
	}
	if err := checkOpenFiles(*nodeCount, *shared); err != nil {
		log.Fatal(err)
	}
	harness.MainWithControlPlane(m, harness.Options{AuditLog: true, Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		return cp.ApplyChartRBAC(ctx, harness.AgentNamespace)
	})
}

// checkOpenFiles fails at once when this process may not open the files a
// fleet of n agents needs (Go raises the soft limit to the hard one at
// start; raising the hard one needs CAP_SYS_RESOURCE), instead of when the
// n-th agent starts. A simulated agent holds its connection to the API
// server open, and its metrics listener unless the fleet shares one (with
// a listener each, 10 000 agents ran out of 20 000 at the 9 603rd).
func checkOpenFiles(n int, shared bool) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	filesPerAgent := 2
	if shared {
		filesPerAgent = 1
	}
	if need := uint64(filesPerAgent*n + 1000); lim.Cur < need {
		return fmt.Errorf("%d simulated agents need about %d open files; this process may open %d (ulimit -n)", n, need, lim.Cur)
	}
	return nil
}

// cost is what the API server (and etcd) used over a window.
type cost struct {
	window            time.Duration
	apiCPU, etcdCPU   float64 // cores
	apiRSS, etcdRSS   float64 // MiB at the end
	requestsPerSecond float64 // every request the API server served
	goroutines        float64 // kube-apiserver's at the end
}

// measure samples the API server's and etcd's CPU over window.
func measure(b *testing.B, window time.Duration) cost {
	b.Helper()
	api0, etcd0, req0 := usage(b, cp.APIServer()), usage(b, cp.Etcd()), requests(b)
	start := time.Now()
	time.Sleep(window)
	api1, etcd1, req1, goroutines := usage(b, cp.APIServer()), usage(b, cp.Etcd()), requests(b), apiserverMetric(b, "go_goroutines")
	w := time.Since(start)
	return cost{
		window: w,
		apiCPU: (api1.CPU - api0.CPU).Seconds() / w.Seconds(), etcdCPU: (etcd1.CPU - etcd0.CPU).Seconds() / w.Seconds(),
		apiRSS: float64(api1.RSSKiB) / 1024, etcdRSS: float64(etcd1.RSSKiB) / 1024,
		requestsPerSecond: (req1 - req0) / w.Seconds(),
		goroutines:        goroutines,
	}
}

// measureProfiled is measure, with kube-apiserver's CPU profile of the
// window written to -fleet.apiserver-profile's prefix plus name, when set:
// what the API server spends its CPU on is what the added-CPU row cannot say.
func measureProfiled(b *testing.B, window time.Duration, name string) cost {
	b.Helper()
	if *profile == "" {
		return measure(b, window)
	}
	done := make(chan error, 1)
	go func() {
		path := fmt.Sprintf("%s-%s.pprof", *profile, name)
		body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(window.Seconds()))).Timeout(window + time.Minute).DoRaw(b.Context())
		if err == nil {
			err = os.WriteFile(path, body, 0o644)
		}
		done <- err
	}()
	c := measure(b, window)
	if err := <-done; err != nil {
		b.Errorf("kube-apiserver CPU profile of %s: %v", name, err)
	}
	// What the server holds, after a collection: where its memory per
	// client goes.
	heap, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(b.Context())
	if err == nil {
		err = os.WriteFile(fmt.Sprintf("%s-%s-heap.pprof", *profile, name), heap, 0o644)
	}
	if err != nil {
		b.Errorf("kube-apiserver heap profile of %s: %v", name, err)
	}
	return c
}

// measureMedian measures -fleet.windows consecutive windows, logs each, and
// returns the one of median API server CPU: on a shared, noisy machine one
// window can catch a burst that is not the fleet's.
func measureMedian(b *testing.B, window time.Duration, name string) cost {
	b.Helper()
	if *windows <= 1 {
		return measureProfiled(b, window, name)
	}
	var cs []cost
	for i := range *windows {
		c := measureProfiled(b, window, fmt.Sprintf("%s-%d", name, i+1))
		logf(b, "%s, window %d of %d: %s", name, i+1, *windows, c)
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(x, y cost) int { return cmp.Compare(x.apiCPU, y.apiCPU) })
	return cs[len(cs)/2]
}

func (c cost) String() string {
	return fmt.Sprintf("kube-apiserver %.3f cores, %.0f MiB, %.0f goroutines; etcd %.3f cores, %.0f MiB; %.1f requests/s (window %.0f s)",
		c.apiCPU, c.apiRSS, c.goroutines, c.etcdCPU, c.etcdRSS, c.requestsPerSecond, c.window.Seconds())
}

func usage(b *testing.B, p *harness.Process) harness.Usage {
	b.Helper()
	u, err := harness.TreeUsage(p.Pid())
	if err != nil {
		b.Fatal(err)
	}
	return u
}

// requests is the API server's apiserver_request_total, summed.
func requests(b *testing.B) float64 { return apiserverMetric(b, "apiserver_request_total") }

// apiserverMetric is one of the API server's metrics, summed over its
// series.
func apiserverMetric(b *testing.B, name string) float64 {
	b.Helper()
	v, err := sumAPIServerMetric(b.Context(), name)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// sumAPIServerMetric sums the API server's samples of name whose labels
// contain every one of match, as harness.SumMetric does.
func sumAPIServerMetric(ctx context.Context, name string, match ...string) (float64, error) {
	body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	return harness.SumMetric(bytes.NewReader(body), name, match...)
}

// machine describes the load the run met.
func machine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("%d cores, load %s", runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
}

// BenchmarkFleet measures a fleet of -fleet.nodes KWOK nodes against the
// harness's API server: its cost with no agents (the kubelets' heartbeats:
// Lease renewals every 10 s, status every 10–20 min), then with a simulated
// agent on every node at the -fleet.period (every check continuous): API
// requests per node per round (audit log), reads not served from the watch
// cache, and the API server's added CPU and memory; then (-fleet.dns-outage)
// a cluster-wide DNS outage: the agents' request rate every second, time
// until the 10 % budget is used, the most nodes re-tainted at once, and the
// recovery once DNS is back. Around these: the time from a Node's creation
// to its untaint on the empty cluster and in the full fleet, and `kubectl
// node-ready status` over the fleet.
func BenchmarkFleet(b *testing.B) {
	ctx := b.Context()
	n := *nodeCount
	logf(b, "machine: %s", machine())
	kwok, err := fleet.StartKWOK(cp)
	if err != nil {
		b.Fatal(err)
	}
	emptyJoin := timeJoins(b, "join-empty")
	idle := measure(b, *window)
	logf(b, "empty plane: %s", idle)

	start := time.Now()
	nodes, err := fleet.CreateKWOKNodes(ctx, cp, fleetPrefix, n, *parallel)
	if err != nil {
		b.Fatal(err)
	}
	if err := fleet.WaitKWOKFleet(ctx, cp, n, 30*time.Minute); err != nil {
		b.Fatal(err)
	}
	logf(b, "%d KWOK nodes Ready with Leases in %.0f s", n, time.Since(start).Seconds())
	time.Sleep(*settle)
	staleCtx, stopStale := context.WithCancel(ctx)
	maxStale := make(chan int, 1)
	go func() { maxStale <- sampleStaleLeases(staleCtx) }()
	kubelets := measureMedian(b, *window, "kubelets")
	stopStale()
	logf(b, "KWOK fleet, no agents: %s; at most %d of %d node Leases older than %d s at any 10 s sample", kubelets, <-maxStale, n, fleet.LeaseDuration)
	b.ReportMetric(kubelets.apiCPU, "apiserver-cores-kubelets")
	// The same join before any agent runs: what the cluster's size and its
	// kubelets' heartbeats cost a join, apart from what the agents add.
	kwokJoin := timeJoins(b, "join-kwok")
	restore := elsewhere(b, kwok.Pid())
	kwokApartJoin := timeJoins(b, "join-kwok-apart")
	restore()
	logf(b, "a node joining %d KWOK nodes with no agents takes %.2f× as long as joining an empty cluster (%.2f× with KWOK at nice 19)",
		n, kwokJoin.Seconds()/emptyJoin.Seconds(), kwokApartJoin.Seconds()/emptyJoin.Seconds())
	b.ReportMetric(kwokJoin.Seconds()/emptyJoin.Seconds(), "join-kwok-ratio-to-empty")
	if *kubeletsOnly {
		return
	}

	if err := cp.PublishAgentPeers(ctx, nodes...); err != nil {
		b.Fatal(err)
	}
	// CoreDNS watches EndpointSlices too: what is left when the agents stop.
	othersWatching, err := apiserverWatchers(ctx)
	if err != nil {
		b.Fatal(err)
	}
	f := fleet.New(cp, fleet.Options{Args: []string{fmt.Sprintf("--check-period=%s", *period)}, Parallel: *parallel, SharedListener: *shared})
	b.Cleanup(func() {
		if err := f.Stop(); err != nil {
			b.Error(err)
		}
	})
	start = time.Now()
	if err := f.Start(ctx, nodes...); err != nil {
		b.Fatal(err)
	}
	logf(b, "%d simulated agents started in %.0f s", n, time.Since(start).Seconds())
	waitVerified(b, n, 30*time.Minute)
	logf(b, "all %d nodes verified %.0f s after the first agent started", n, time.Since(start).Seconds())
	time.Sleep(*settle)

	offset, err := fleet.AuditOffset(cp.AuditLogPath())
	if err != nil {
		b.Fatal(err)
	}
	self0, measured := selfCPU(b), time.Now()
	agents := measureMedian(b, *window, "agents")
	self1, spent := selfCPU(b), time.Since(measured)
	reqs, _, err := fleet.Requests(cp.AuditLogPath(), offset)
	if err != nil {
		b.Fatal(err)
	}
	rounds := spent.Seconds() / period.Seconds()
	byKind := map[string]int{}
	total, etcdReads, writes := 0, 0, 0
	for _, kinds := range reqs {
		for k, c := range kinds {
			byKind[k.String()] += c
			total += c
			if (k.Verb == "get" || k.Verb == "list") && !k.Cached {
				etcdReads += c
			}
			if !slices.Contains([]string{"get", "list", "watch"}, k.Verb) {
				writes += c
			}
		}
	}
	perNodeRound := float64(total) / float64(n) / rounds
	logf(b, "with agents: %s", agents)
	logf(b, "the simulator process (this benchmark): %.0f MiB resident, %.3f cores (%d agents)",
		selfRSSMiB(b), (self1-self0).Seconds()/spent.Seconds(), f.Len())
	if *bracket {
		if *extraWatch {
			nodeWatchCost(b, f, agents)
		}
		if err := f.Stop(); err != nil {
			b.Fatal(err)
		}
		waitAgentsGone(b, othersWatching)
		after := measureMedian(b, *window, "kubelets-after")
		logf(b, "KWOK fleet again, the agents stopped: %s", after)
		kubelets.apiCPU = (kubelets.apiCPU + after.apiCPU) / 2
	}
	addedCPU := agents.apiCPU - kubelets.apiCPU
	heartbeatCPU := kubelets.apiCPU - idle.apiCPU
	logf(b, "agents' requests in the window (audit log): %d = %.3f per node per round; by kind %v; reads not from the watch cache %d; writes %d",
		total, perNodeRound, byKind, etcdReads, writes)
	logf(b, "API server CPU: idle %.3f, + heartbeats %.3f, + agents %.3f cores: agents add %.1f %% of the heartbeats' cost; memory %.0f → %.0f → %.0f MiB",
		idle.apiCPU, heartbeatCPU, addedCPU, 100*addedCPU/heartbeatCPU, idle.apiRSS, kubelets.apiRSS, agents.apiRSS)
	b.ReportMetric(perNodeRound, "requests/node/round")
	b.ReportMetric(float64(etcdReads), "etcd-reads")
	b.ReportMetric(100*addedCPU/heartbeatCPU, "apiserver-cpu-%-of-heartbeats")
	b.ReportMetric(agents.apiRSS-kubelets.apiRSS, "apiserver-MiB-added")
	if *bracket {
		return
	}

	fullJoin := timeJoins(b, "join-full")
	logf(b, "a node joining %d nodes takes %.2f× as long as joining an empty cluster", n, fullJoin.Seconds()/emptyJoin.Seconds())
	b.ReportMetric(fullJoin.Seconds()/emptyJoin.Seconds(), "join-ratio-to-empty")
	restore = elsewhere(b, os.Getpid(), kwok.Pid())
	apartJoin := timeJoins(b, "join-full-apart")
	restore()
	logf(b, "the same with the other nodes' processes (simulated agents, KWOK) at nice 19, as if on machines of their own: %.2f×", apartJoin.Seconds()/emptyJoin.Seconds())
	b.ReportMetric(apartJoin.Seconds()/emptyJoin.Seconds(), "join-apart-ratio-to-empty")
	status, statusRSS := timeStatus(b)
	b.ReportMetric(status.Seconds(), "status-s")
	b.ReportMetric(statusRSS, "status-MiB")

	if *restarts > 0 {
		rollout(b, n, min(*restarts, n), 2*time.Second)
	}
	if *outage {
		dnsOutages(b, f, n, offset)
	}
}

// nodeWatchCost opens one more own-node watch per agent, measures the API
// server again after they settle, and closes them: the median added CPU
// against agents' is what one own-node watch per node costs.
func nodeWatchCost(b *testing.B, f *fleet.Fleet, agents cost) {
	b.Helper()
	ctx, stop := context.WithCancel(b.Context())
	defer stop()
	start := time.Now()
	if err := f.WatchOwnNodes(ctx); err != nil {
		b.Fatal(err)
	}
	logf(b, "one more own-node watch per agent (%d) open in %.0f s", f.Len(), time.Since(start).Seconds())
	time.Sleep(*settle)
	extra := measureMedian(b, *window, "agents-extra-node-watch")
	logf(b, "with one more own-node watch per agent: %s; the watches add %.3f cores, %.1f MiB", extra, extra.apiCPU-agents.apiCPU, extra.apiRSS-agents.apiRSS)
	b.ReportMetric(extra.apiCPU-agents.apiCPU, "apiserver-cores-extra-node-watches")
}

// waitAgentsGone waits until the stopped agents' EndpointSlice watches are
// gone (others: those open before the agents started), then 100 s more for
// their transports to close the idle connections (after 90 s): until then
// the server still holds their TLS sessions.
func waitAgentsGone(b *testing.B, others int) {
	b.Helper()
	start := time.Now()
	for {
		n, err := apiserverWatchers(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if n <= others {
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("%d watches of EndpointSlices still open 5 minutes after the agents stopped (%d before they started)", n, others)
		}
		time.Sleep(5 * time.Second)
	}
	time.Sleep(100 * time.Second)
	logf(b, "the agents' watches closed; measuring %.0f s after they stopped", time.Since(start).Seconds())
}

// apiserverWatchers is kube-apiserver's count of open EndpointSlice watches
// (apiserver_longrunning_requests): the agents' and CoreDNS's here.
func apiserverWatchers(ctx context.Context) (int, error) {
	n, err := sumAPIServerMetric(ctx, "apiserver_longrunning_requests", `resource="endpointslices"`, `verb="WATCH"`)
	return int(n), err
}

// sampleStaleLeases counts the stale node Leases every 10 s until ctx ends
// and returns the most seen at once.
func sampleStaleLeases(ctx context.Context) int {
	most := 0
	for {
		select {
		case <-ctx.Done():
			return most
		case <-time.After(10 * time.Second):
		}
		stale, _, err := fleet.StaleLeases(ctx, cp, fleetPrefix)
		if err == nil {
			most = max(most, stale)
		}
	}
}

// waitVerified waits until want nodes carry the verified label.
func waitVerified(b *testing.B, want int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, _, err := countNodes(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if v >= want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d nodes verified after %s", v, want, timeout)
		}
		time.Sleep(5 * time.Second)
	}
}

// countNodes counts the verified and the re-tainted nodes (paged, from the
// watch cache).
func countNodes(ctx context.Context) (verified, retainted int, err error) {
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (k8sruntime.Object, error) {
		return cp.Client.CoreV1().Nodes().List(ctx, o)
	})
	err = p.EachListItem(ctx, metav1.ListOptions{ResourceVersion: "0"}, func(obj k8sruntime.Object) error {
		node := obj.(*corev1.Node)
		if node.Labels[api.VerifiedLabel] == "true" {
			verified++
		}
		if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == harness.UnhealthyTaint.Key }) {
			retainted++
		}
		return nil
	})
	return verified, retainted, err
}

// selfCPU is the CPU time this process has used (not its children: the
// control plane).
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfRSSMiB is this process's resident memory.
func selfRSSMiB(b *testing.B) float64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kib) / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// logf logs to the benchmark's result and at once to stderr: a run at
// 10 000 nodes takes most of an hour, and b.Logf prints only at its end.
func logf(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	log.Printf(format, args...)
}
