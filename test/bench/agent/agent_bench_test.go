//go:build e2e

// Package agent_test benchmarks the real agent binary against the real
// control plane: start-to-untaint latency, and the steady-state cost of 50
// agents (API requests per round, resident memory, CPU).
//
//	make bench                                    # everything
//	go test -tags e2e -run '^$' -bench . -benchtime 1x ./test/bench/agent/
package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	startRuns   = flag.Int("agent.start-runs", 25, "runs of the start-to-untaint benchmark")
	fleetSize   = flag.Int("agent.fleet", 50, "agents in the steady-state benchmark")
	fleetWindow = flag.Duration("agent.window", 5*time.Minute, "measuring window of the steady-state benchmark")
	fleetSettle = flag.Duration("agent.settle", 70*time.Second, "wait after all nodes are verified before measuring")
	baseline    = flag.String("agent.baseline", "", "another agent binary (an older build) to run side by side in the start-to-untaint benchmark, alternating runs")
)

// gateArgs switch on the gates the current agent has beyond the default
// DaemonSet gate: the condition gate (the harness's nodes report no
// conditions, so an absent one passes; reading it costs no request).
var gateArgs = []string{"--require-conditions=Ready=True", "--require-conditions.absent=pass"}

var cp *harness.ControlPlane

func TestMain(m *testing.M) {
	flag.Parse()
	harness.MainWithControlPlane(m, harness.Options{AuditLog: true, Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		return cp.ApplyChartRBAC(ctx, harness.AgentNamespace)
	})
}

// BenchmarkAgentStartToUntaint measures, for a healthy node, the time from
// exec of the agent process to the watch event that shows the startup taint
// gone, over -agent.start-runs fresh nodes, with the gates on. With
// -agent.baseline it alternates runs of that binary (default flags) and the
// current one, so both meet the same machine load, and reports both.
func BenchmarkAgentStartToUntaint(b *testing.B) {
	ctx := b.Context()
	type variant struct {
		name, bin string
		extra     []string
		samples   []time.Duration
	}
	variants := []*variant{{name: "current (gates on)", bin: harness.BuiltBinary(b, harness.AgentBinary), extra: gateArgs}}
	if *baseline != "" {
		variants = append(variants, &variant{name: "baseline " + *baseline, bin: *baseline})
	}
	for i := range *startRuns * len(variants) {
		v := variants[i%len(variants)]
		name := fmt.Sprintf("start-%d", i)
		node, err := cp.CreateNode(ctx, name, harness.NodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		kubeconfig, err := cp.NodeKubeconfig(ctx, harness.AgentNamespace, harness.AgentServiceAccount, node)
		if err != nil {
			b.Fatal(err)
		}
		if err := cp.PublishAgentPeers(ctx, node); err != nil {
			b.Fatal(err)
		}
		w, err := cp.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		p, err := harness.StartProcess(cp.Dir, "agent-"+node.Name, v.bin, append(cp.AgentArgs(node, kubeconfig), v.extra...), nil)
		if err != nil {
			b.Fatal(err)
		}
		d, err := harness.UntaintedAfter(w, harness.StartupTaint.Key, start, 30*time.Second)
		w.Stop()
		if err != nil {
			b.Fatalf("run %d: %v\n%s", i, err, p.Tail(20))
		}
		v.samples = append(v.samples, d)
		if err := p.Stop(5 * time.Second); err != nil {
			b.Fatal(err)
		}
		if err := cp.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for i, v := range variants {
		samples := v.samples
		slices.Sort(samples)
		p50, p95 := percentile(samples, 50), percentile(samples, 95)
		if i == 0 {
			b.ReportMetric(ms(p50), "p50-ms")
			b.ReportMetric(ms(p95), "p95-ms")
			b.ReportMetric(ms(samples[0]), "min-ms")
			b.ReportMetric(ms(samples[len(samples)-1]), "max-ms")
		} else {
			b.ReportMetric(ms(percentile(variants[0].samples, 50))/ms(p50), "p50-ratio-to-baseline")
		}
		b.Logf("%s: start→untaint over %d runs: p50 %.1f ms, p95 %.1f ms, min %.1f ms, max %.1f ms",
			v.name, len(samples), ms(p50), ms(p95), ms(samples[0]), ms(samples[len(samples)-1]))
	}
}

// BenchmarkAgentSteadyState runs -agent.fleet agents at the default 60 s
// period, waits until all are verified and one period has passed, then
// measures over -agent.window: API requests per agent per round (from the
// API server's apiserver_request_total, and by verb and resource from its
// audit log), writes, resident memory and CPU of each agent.
func BenchmarkAgentSteadyState(b *testing.B) {
	ctx := b.Context()
	var nodes []harness.Node
	for i := range *fleetSize {
		n, err := cp.CreateNode(ctx, fmt.Sprintf("fleet-%02d", i), harness.NodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	if err := cp.PublishAgentPeers(ctx, nodes...); err != nil {
		b.Fatal(err)
	}
	var procs []*harness.Process
	for _, n := range nodes {
		procs = append(procs, cp.StartAgent(b, n, gateArgs...).Process)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !allVerified(b, nodes) {
		if time.Now().After(deadline) {
			b.Fatal("not all nodes verified within 2 minutes")
		}
		time.Sleep(time.Second)
	}
	b.Logf("%d agents verified; settling for %s", len(nodes), *fleetSettle)
	time.Sleep(*fleetSettle)

	auditStart := fileSize(b, cp.AuditLogPath())
	before := requestTotals(b)
	cpuBefore := cpuTicks(b, procs)
	start := time.Now()
	time.Sleep(*fleetWindow)
	window := time.Since(start)
	after := requestTotals(b)
	cpuAfter := cpuTicks(b, procs)

	rounds := window.Seconds() / 60
	var total, serverWrites float64
	for k, v := range after {
		d := v - before[k]
		total += d
		if !slices.Contains([]string{"GET", "LIST", "WATCH"}, k.verb) {
			serverWrites += d
		}
	}
	total-- // the first /metrics scrape of this benchmark is counted
	perRound := total / float64(len(nodes)) / rounds
	byKind, etcdReads, clusterWideLists := auditBreakdown(b, cp.AuditLogPath(), auditStart)
	writes := 0.0
	for k, n := range byKind {
		if verb, _, _ := strings.Cut(k, " "); !slices.Contains([]string{"get", "list", "watch"}, verb) {
			writes += float64(n)
		}
	}

	var rss, anon, file, millicores []float64
	for i, p := range procs {
		rss = append(rss, float64(p.StatusKiBT(b, "VmRSS"))/1024)
		anon = append(anon, float64(p.StatusKiBT(b, "RssAnon"))/1024)
		file = append(file, float64(p.StatusKiBT(b, "RssFile"))/1024)
		millicores = append(millicores, float64(cpuAfter[i]-cpuBefore[i])/100/window.Seconds()*1000)
	}
	sort.Float64s(rss)
	sort.Float64s(anon)
	sort.Float64s(file)
	sort.Float64s(millicores)
	b.ReportMetric(perRound, "requests/agent/round")
	b.ReportMetric(writes, "agent-writes")
	b.ReportMetric(median(rss), "rss-MiB-p50")
	b.ReportMetric(rss[len(rss)-1], "rss-MiB-max")
	b.ReportMetric(median(millicores), "millicores-p50")
	b.ReportMetric(millicores[len(millicores)-1], "millicores-max")
	b.Logf("%d agents, %.0f s window (%.2f rounds): %.0f API requests = %.2f per agent per round; %.0f writes by agents, %.0f writes in all (the API server's own leases and endpoints)",
		len(nodes), window.Seconds(), rounds, total, perRound, writes, serverWrites)
	b.Logf("agent requests by verb/resource in the window (audit log): %v; reads not served from the watch cache: %d", byKind, etcdReads)
	b.ReportMetric(float64(etcdReads), "etcd-reads")
	b.Logf("cluster-wide LISTs of nodes or pods by agents over the whole run (audit log): %d", clusterWideLists)
	b.Logf("RSS MiB: p50 %.1f (anonymous %.1f, file-backed %.1f) max %.1f; CPU millicores: p50 %.3f max %.3f", median(rss), median(anon), median(file), rss[len(rss)-1], median(millicores), millicores[len(millicores)-1])
	if writes != 0 {
		b.Errorf("healthy agents wrote %v times", writes)
	}
	if clusterWideLists != 0 {
		b.Errorf("agents made %d cluster-wide LISTs of nodes or pods", clusterWideLists)
	}
}

func allVerified(b *testing.B, nodes []harness.Node) bool {
	list, err := cp.Client.CoreV1().Nodes().List(b.Context(), metav1.ListOptions{LabelSelector: "node-ready/verified=true"})
	if err != nil {
		b.Fatal(err)
	}
	return len(list.Items) >= len(nodes)
}

type reqKey struct{ verb, resource, code string }

// requestTotals scrapes apiserver_request_total from the API server.
func requestTotals(b *testing.B) map[reqKey]float64 {
	rt, err := rest.TransportFor(cp.Config)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Get(cp.Config.Host + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	samples, err := harness.Samples(resp.Body, "apiserver_request_total")
	if err != nil {
		b.Fatal(err)
	}
	out := map[reqKey]float64{}
	for _, s := range samples {
		out[reqKey{s.Label("verb"), s.Label("resource"), s.Label("code")}] += s.Value
	}
	return out
}

type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	ObjectRef  *struct {
		Resource string `json:"resource"`
	} `json:"objectRef"`
}

// auditBreakdown counts the agents' requests after offset by verb and
// resource, the reads among them that the API server could not serve from
// its watch cache (a GET or LIST without resourceVersion=0 reads etcd), and
// their cluster-wide LISTs of nodes or pods over the whole log (a LIST of
// nodes must carry a field selector for the agent's own node or a label
// selector for re-tainted nodes; a LIST of pods, the agent's own node's).
func auditBreakdown(b *testing.B, path string, offset int64) (byKind map[string]int, etcdReads, clusterWide int) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	byKind = map[string]int{}
	var pos int64
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			pos += int64(len(line))
			var ev auditEvent
			if json.Unmarshal(line, &ev) == nil && ev.Stage == "ResponseComplete" && strings.HasPrefix(ev.UserAgent, "kube-node-ready-agent") {
				res := ""
				if ev.ObjectRef != nil {
					res = ev.ObjectRef.Resource
				}
				uri, _ := url.QueryUnescape(ev.RequestURI)
				if ev.Verb == "list" && ((res == "pods" && !strings.Contains(uri, "fieldSelector=spec.nodeName=")) ||
					(res == "nodes" && !strings.Contains(uri, "fieldSelector=metadata.name") && !strings.Contains(uri, "labelSelector="))) {
					clusterWide++
				}
				if pos > offset {
					byKind[ev.Verb+" "+res]++
					if (ev.Verb == "get" || ev.Verb == "list") && res != "" && !strings.Contains(uri, "resourceVersion=0") {
						etcdReads++
					}
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return byKind, etcdReads, clusterWide
}

func fileSize(b *testing.B, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

// cpuTicks returns utime+stime (clock ticks) of each process.
func cpuTicks(b *testing.B, procs []*harness.Process) []int64 {
	out := make([]int64, len(procs))
	for i, p := range procs {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
		if err != nil {
			b.Fatal(err)
		}
		// Fields after the parenthesised command name; utime and stime are fields 14 and 15.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		out[i] = u + s
	}
	return out
}

func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func median(sorted []float64) float64 { return sorted[len(sorted)/2] }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
