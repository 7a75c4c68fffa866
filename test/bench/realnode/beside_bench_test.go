//go:build e2e

package realnode_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	besideWindow   = flag.Duration("realnode.beside-window", 90*time.Second, "BenchmarkAgentBesideKubelet: length of each window")
	besideIdentity = flag.Duration("realnode.beside-identity", 10*time.Minute, "BenchmarkAgentBesideKubelet: the window of each client's own requests, watches, events and bytes")
	besideRounds   = flag.Int("realnode.beside-rounds", 3, "BenchmarkAgentBesideKubelet: rounds of its three windows (agents and kubelets; kubelets only; neither)")
	besideProf     = flag.String("realnode.apiserver-profile", "", "BenchmarkAgentBesideKubelet: write kube-apiserver's CPU profile of every window and its heap profile at the window's end into this directory")
)

// noAgents is the node selector that takes the agent DaemonSet off every
// node while the kubelets alone are measured.
const noAgents = `{"spec":{"template":{"spec":{"nodeSelector":{"kube-node-ready.test/no-agents":"true"}}}}}`

// serverWindow is what kube-apiserver used over a window.
type serverWindow struct {
	cores      float64 // CPU over the window
	heapMiB    float64 // live heap at its end, after a collection
	goroutines float64 // at its end
}

// Client classes, by identity (and, for the kubelet, by namespace).
const (
	kubelet = "kubelet"
	// forOurPods is the kubelet's work in kube-node-ready's namespace:
	// the service-account tokens, ConfigMaps and status of our pods, which
	// the kubelet would not do without kube-node-ready.
	forOurPods = "kubelet, for kube-node-ready's pods"
	agent      = "agent"
	webhook    = "webhook"
	kubeProxy  = "kube-proxy"
)

// BenchmarkAgentBesideKubelet answers what kube-node-ready costs the API
// server per node beside what the node's kubelet costs it, column by column,
// per node and per hour. Requests by verb and resource, watches held,
// watch events and bytes are each client's own (identity): the audit log,
// the clients' TCP sockets, copies of their watches; the agent's column
// includes the kubelet's work for kube-node-ready's pods. Live heap,
// goroutines and CPU cannot be split by client inside one process: they are
// differences between windows in each round, alternating: agents and
// kubelets; the agents taken off every node (kubelets only); the kubelets
// stopped too (kube-proxy, containerd and the containers keep running). The
// agent's share is the first difference, the kubelet's the second, each
// divided by the nodes; the figures are the medians of the rounds'
// differences.
func BenchmarkAgentBesideKubelet(b *testing.B) {
	ctx := b.Context()
	nodes := c.Nodes
	n := float64(len(nodes))
	ds, err := c.Client.AppsV1().DaemonSets("kube-node-ready").Get(ctx, "kube-node-ready", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	deployments, err := c.Client.AppsV1().Deployments("kube-node-ready").List(ctx, metav1.ListOptions{})
	if err != nil || len(deployments.Items) != 1 {
		b.Fatalf("the webhook's Deployment: %v (%d found)", err, len(deployments.Items))
	}
	sa := "system:serviceaccount:kube-node-ready:"
	agentUser, webhookUser := sa+ds.Spec.Template.Spec.ServiceAccountName, sa+deployments.Items[0].Spec.Template.Spec.ServiceAccountName
	classOf := func(user, uri string) string {
		switch {
		case strings.HasPrefix(user, "system:node:") && strings.Contains(uri, "/namespaces/kube-node-ready/"):
			return forOurPods
		case strings.HasPrefix(user, "system:node:"):
			return kubelet
		case user == agentUser:
			return agent
		case user == webhookUser:
			return webhook
		case user == "system:kube-proxy":
			return kubeProxy
		}
		return ""
	}
	svc, err := c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	apiserverIP := c.Families[0].APIServerIP
	if *besideProf != "" {
		if err := os.MkdirAll(*besideProf, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	fmt.Printf("machine: %s; %d real nodes, kubelet timings %s; identity window %s, then %d rounds of 3 windows of %s\n",
		machine(), len(nodes), *timings, *besideIdentity, *besideRounds, *besideWindow)
	time.Sleep(settle)

	// Each client's own: one window no restart disturbs (the kubelets'
	// watches renew every 5 to 10 minutes, the agents' every 30 to 60),
	// with a copy of every watch the node's clients and the webhook hold
	// open through it.
	before, err := clientSockets(ctx, nodes, apiserverIP, svc.Spec.ClusterIP)
	if err != nil {
		b.Fatal(err)
	}
	from := time.Now()
	_, open, err := auditByClient(c.AuditLogPath(), from, from, classOf)
	if err != nil {
		b.Fatal(err)
	}
	list, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	events, bookmarks, watchBytes, err := watchEvents(ctx, c.Config, open, list.ResourceVersion, *besideIdentity)
	if err != nil {
		b.Fatal(err)
	}
	to := time.Now()
	hours := to.Sub(from).Hours()
	after, err := clientSockets(ctx, nodes, apiserverIP, svc.Spec.ClusterIP)
	if err != nil {
		b.Fatal(err)
	}
	calls, _, err := auditByClient(c.AuditLogPath(), from, to, classOf)
	if err != nil {
		b.Fatal(err)
	}
	sent := map[string]float64{}
	for class := range after {
		got, closed := received(before[class], after[class])
		sent[class] = float64(got) / hours / n
		if closed > 0 {
			fmt.Printf("%d of the %ss' connections closed in the window: their last bytes are not counted\n", closed, class)
		}
	}
	held := map[string]int{}
	for _, w := range open {
		held[w.class]++
	}

	// The API server's heap, goroutines and CPU: three windows a round.
	var on, off, none []serverWindow
	for r := range *besideRounds {
		name := func(phase string) string { return fmt.Sprintf("%d-%s", r+1, phase) }
		w := measureServer(b, name("agents"))
		on = append(on, w)
		fmt.Printf("%s: %s\n", name("agents"), w)

		// The kubelets alone.
		if _, err := c.Client.AppsV1().DaemonSets("kube-node-ready").Patch(ctx, "kube-node-ready", types.StrategicMergePatchType, []byte(noAgents), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		waitAgents(b, 0)
		// The agents' connections end with their processes; a moment for
		// the server to let go of their watches.
		time.Sleep(10 * time.Second)
		w = measureServer(b, name("kubelets"))
		off = append(off, w)
		fmt.Printf("%s: %s\n", name("kubelets"), w)

		// Neither.
		for _, node := range nodes {
			if err := node.StopKubelet(); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(10 * time.Second)
		w = measureServer(b, name("neither"))
		none = append(none, w)
		fmt.Printf("%s: %s\n", name("neither"), w)
		for _, node := range nodes {
			if err := node.StartKubelet(); err != nil {
				b.Fatal(err)
			}
		}
		for _, node := range nodes {
			if err := node.WaitReady(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := c.Client.AppsV1().DaemonSets("kube-node-ready").Patch(ctx, "kube-node-ready", types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/template/spec/nodeSelector/kube-node-ready.test~1no-agents"}]`), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		waitAgents(b, len(nodes))
		time.Sleep(settle)
	}

	// The table: per node, per hour.
	fromCalls := func(f func(*clientCalls) float64, classes ...string) float64 {
		x := 0.0
		for _, class := range classes {
			if calls[class] != nil {
				x += f(calls[class])
			}
		}
		return x
	}
	requests := func(cc *clientCalls) float64 { return float64(cc.total()) / hours / n }
	watchesHeld := func(cc *clientCalls) float64 { return cc.watchSeconds / 3600 / hours / n }
	perHour := func(m map[string]int, classes ...string) float64 {
		x := 0
		for _, class := range classes {
			x += m[class]
		}
		return float64(x) / hours / n
	}
	diff := func(a, b []serverWindow, f func(serverWindow) float64) float64 {
		var v []float64
		for i := range a {
			v = append(v, (f(a[i])-f(b[i]))/n)
		}
		return median(v)
	}
	heap := func(w serverWindow) float64 { return w.heapMiB }
	goroutines := func(w serverWindow) float64 { return w.goroutines }
	cpu := func(w serverWindow) float64 { return w.cores * 3600 }
	type row struct {
		name, key, unit string
		kubelet, agent  float64
		note            string
	}
	rows := []row{
		{"requests (watches counted when opened)", "requests", "per node per hour", fromCalls(requests, kubelet), fromCalls(requests, agent, forOurPods),
			fmt.Sprintf("the agent's own %.1f, the kubelet's for our pods %.1f", fromCalls(requests, agent), fromCalls(requests, forOurPods))},
		{"watches held", "watches", "per node", fromCalls(watchesHeld, kubelet), fromCalls(watchesHeld, agent, forOurPods),
			fmt.Sprintf("the agent's own %.2f, the kubelet's for our pods %.2f", fromCalls(watchesHeld, agent), fromCalls(watchesHeld, forOurPods))},
		{"watch events delivered", "events", "per node per hour", perHour(events, kubelet), perHour(events, agent, forOurPods),
			fmt.Sprintf("the agent's own %.0f (bookmarks %.0f), the kubelet's for our pods %.0f; the kubelet's bookmarks %.0f",
				perHour(events, agent), perHour(bookmarks, agent), perHour(events, forOurPods), perHour(bookmarks, kubelet))},
		{"bytes sent (TCP payload)", "bytes", "KiB per node per hour", sent[kubelet] / 1024, sent[agent] / 1024,
			fmt.Sprintf("the kubelet's sockets carry its work for our pods too; in watch events (JSON copies): kubelet %.0f, agent %.0f, for our pods %.0f",
				float64(watchBytes[kubelet])/1024/hours/n, float64(watchBytes[agent])/1024/hours/n, float64(watchBytes[forOurPods])/1024/hours/n)},
		{"API server live heap", "heap", "MiB per node", diff(off, none, heap), diff(on, off, heap), ""},
		{"API server goroutines", "goroutines", "per node", diff(off, none, goroutines), diff(on, off, goroutines), ""},
		{"API server CPU", "cpu", "CPU-seconds per node per hour", diff(off, none, cpu), diff(on, off, cpu), ""},
	}
	var lines []string
	for _, r := range rows {
		ratio := r.agent / r.kubelet
		verdict := "met"
		if ratio > 0.25 {
			verdict = "missed"
		}
		lines = append(lines, fmt.Sprintf("| %s (%s) | %.2f | %.2f | %.0f %% | %s |", r.name, r.unit, r.kubelet, r.agent, 100*ratio, verdict))
		if r.note != "" {
			lines = append(lines, "|   "+r.note+" | | | | |")
		}
		b.ReportMetric(ratio, r.key+"-agent/kubelet")
	}
	// Printed, not logged: the testing package cuts long benchmark logs.
	fmt.Printf("\nthe agent beside the kubelet, %d real nodes, kubelet timings %s; identity window %s; heap, goroutines, CPU: medians of %d rounds of %s windows; machine at the end: %s\n"+
		"| column | kubelet | agent | agent / kubelet | ≤ 25 %% |\n| --- | --- | --- | --- | --- |\n%s\n",
		len(nodes), *timings, *besideIdentity, *besideRounds, *besideWindow, machine(), strings.Join(lines, "\n"))
	fmt.Printf("rounds: %s\n", strings.Join(roundLines(on, off, none), "; "))
	fmt.Printf("watches held at the identity window's start: %v (on %d nodes)\n", held, len(nodes))
	fmt.Printf("the webhook (one per cluster), divided by the nodes: %.1f requests per node per hour, %.2f watches, %.0f watch events per node per hour\n",
		fromCalls(requests, webhook), fromCalls(watchesHeld, webhook), perHour(events, webhook))
	for _, class := range []string{kubelet, forOurPods, agent, webhook, kubeProxy} {
		if cc := calls[class]; cc != nil {
			fmt.Printf("%s: requests per node per hour by verb and resource: %s\n", class, perNodeHour(cc.requests, hours, n))
			fmt.Printf("%s: watches opened per node per hour: %s\n", class, perNodeHour(cc.watchesOpened, hours, n))
		}
	}
	for _, w := range open {
		if w.class != kubeProxy {
			fmt.Printf("open watch of %s: %s\n", w.class, w.uri)
		}
	}
}

// roundLines names each round's three windows' API server figures.
func roundLines(on, off, none []serverWindow) []string {
	var out []string
	for i := range on {
		out = append(out, fmt.Sprintf("round %d: %.4f/%.4f/%.4f cores, heap %.2f/%.2f/%.2f MiB, %.0f/%.0f/%.0f goroutines (agents/kubelets only/neither)",
			i+1, on[i].cores, off[i].cores, none[i].cores, on[i].heapMiB, off[i].heapMiB, none[i].heapMiB, on[i].goroutines, off[i].goroutines, none[i].goroutines))
	}
	return out
}

// perNodeHour lists counts by kind per node per hour.
func perNodeHour(m map[string]int, hours, n float64) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s %.1f", k, float64(v)/hours/n))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// clientSockets reads the TCP connections to the API server of every
// node's kubelet (in the node's namespaces) and agent (in its pod's), by
// class.
func clientSockets(ctx context.Context, nodes []*harness.RealNode, apiserverIP, serviceIP string) (map[string]socketBytes, error) {
	out := map[string]socketBytes{kubelet: {}, agent: {}}
	cgroups, err := agentCgroups(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, node := range nodes {
		raw, err := node.Exec(ctx, "ss", "-tinpH", "dst", apiserverIP)
		if err != nil {
			return nil, err
		}
		for k, v := range parseSockets(raw, "kubelet") {
			out[kubelet][node.Name+"/"+k] = v
		}
		procs, err := os.ReadFile(filepath.Join(cgroups[node.Name], "cgroup.procs"))
		if err != nil {
			return nil, err
		}
		pids := strings.Fields(string(procs))
		if len(pids) == 0 {
			return nil, fmt.Errorf("no process in the agent container's cgroup on %s", node.Name)
		}
		s, err := readSockets(ctx, []string{"nsenter", "--target", pids[0], "--net"}, serviceIP, "")
		if err != nil {
			return nil, err
		}
		for k, v := range s {
			out[agent][node.Name+"/"+k] = v
		}
	}
	return out, nil
}

// waitAgents waits until want agent pods run (and no other is left).
func waitAgents(b *testing.B, want int) {
	b.Helper()
	err := wait.PollUntilContextTimeout(b.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("kube-node-ready").List(ctx, metav1.ListOptions{LabelSelector: "app=kube-node-ready"})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Ready }) {
				running++
			}
		}
		return running == want && len(pods.Items) == want, nil
	})
	if err != nil {
		b.Fatalf("%d agent pods not running: %v", want, err)
	}
}

var heapAlloc = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)`)

// measureServer measures kube-apiserver over one window: its CPU (and
// profile, with -realnode.apiserver-profile), then its goroutines and its
// live heap after a collection.
func measureServer(b *testing.B, name string) serverWindow {
	b.Helper()
	ctx := b.Context()
	rc := c.Client.CoreV1().RESTClient()
	done := make(chan error, 1)
	if *besideProf != "" {
		go func() {
			body, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(int(besideWindow.Seconds()))).
				Timeout(*besideWindow + time.Minute).DoRaw(ctx)
			if err == nil {
				err = os.WriteFile(filepath.Join(*besideProf, name+".pprof"), body, 0o644)
			}
			done <- err
		}()
	} else {
		done <- nil
	}
	u0, err := harness.TreeUsage(c.APIServer().Pid())
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	time.Sleep(*besideWindow)
	u1, err := harness.TreeUsage(c.APIServer().Pid())
	if err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	if err := <-done; err != nil {
		b.Errorf("kube-apiserver CPU profile of %s: %v", name, err)
	}
	metrics, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	goroutines, err := harness.SumMetric(strings.NewReader(string(metrics)), "go_goroutines")
	if err != nil {
		b.Fatal(err)
	}
	// debug=1: the text profile, which ends with the runtime's memory
	// statistics; gc=1 collects first, so HeapAlloc is the live heap.
	heap, err := rc.Get().AbsPath("/debug/pprof/heap").Param("gc", "1").Param("debug", "1").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if *besideProf != "" {
		if err := os.WriteFile(filepath.Join(*besideProf, name+"-heap.txt"), heap, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	m := heapAlloc.FindSubmatch(heap)
	if m == nil {
		b.Fatal("no HeapAlloc in kube-apiserver's heap profile")
	}
	alloc, _ := strconv.ParseFloat(string(m[1]), 64)
	return serverWindow{
		cores:      (u1.CPU - u0.CPU).Seconds() / elapsed.Seconds(),
		heapMiB:    alloc / (1 << 20),
		goroutines: goroutines,
	}
}

func (w serverWindow) String() string {
	return fmt.Sprintf("kube-apiserver %.4f cores, live heap %.2f MiB, %.0f goroutines", w.cores, w.heapMiB, w.goroutines)
}

// machine names the cores and the load now.
func machine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	if len(f) > 3 {
		f = f[:3]
	}
	return fmt.Sprintf("%d cores, load %s", runtime.NumCPU(), strings.Join(f, " "))
}
