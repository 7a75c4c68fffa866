//go:build e2e

// Package webhook benchmarks kube-node-ready-webhook: admission latency and
// throughput with hey over TLS keep-alive next to a null TLS handler, the
// webhook's memory under that load, and what the webhook adds to a real
// `kubectl create node`. Results are printed as the markdown of the
// "## Webhook" section of docs/benchmarks.md; nothing here asserts on time.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/certs"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	webhookIP = "10.213.0.3"
	nullIP    = "10.213.0.6"
	rounds    = 3
	loadTime  = "10s"
)

type series struct {
	p50, p99 []time.Duration
	rps      []float64
}

type heyResult struct {
	rps           float64
	p50, p99      time.Duration
	non200, total int
}

var (
	reRPS    = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	rePct    = regexp.MustCompile(`\s(\d+)% in ([0-9.]+) secs`)
	reStatus = regexp.MustCompile(`\[(\d+)\]\s+(\d+) responses`)
)

func runHey(b *testing.B, url, bodyFile string, workers, perWorkerQPS int) heyResult {
	b.Helper()
	args := []string{"-z", loadTime, "-c", strconv.Itoa(workers), "-m", "POST", "-T", "application/json", "-D", bodyFile}
	if perWorkerQPS > 0 {
		args = append(args, "-q", strconv.Itoa(perWorkerQPS))
	}
	out, err := exec.Command("hey", append(args, url)...).CombinedOutput()
	if err != nil {
		b.Fatalf("hey: %v: %s", err, out)
	}
	var r heyResult
	s := string(out)
	if m := reRPS.FindStringSubmatch(s); m != nil {
		r.rps, _ = strconv.ParseFloat(m[1], 64)
	}
	for _, m := range rePct.FindAllStringSubmatch(s, -1) {
		secs, _ := strconv.ParseFloat(m[2], 64)
		d := time.Duration(secs * float64(time.Second))
		switch m[1] {
		case "50":
			r.p50 = d
		case "99":
			r.p99 = d
		}
	}
	for _, m := range reStatus.FindAllStringSubmatch(s, -1) {
		n, _ := strconv.Atoi(m[2])
		r.total += n
		if m[1] != "200" {
			r.non200 += n
		}
	}
	if r.total == 0 || r.non200 > 0 || r.rps == 0 {
		b.Fatalf("hey run not usable (%d responses, %d not 200):\n%s", r.total, r.non200, s)
	}
	return r
}

func median[T int | float64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func BenchmarkWebhook(b *testing.B) {
	for range b.N {
		benchWebhook(b)
	}
}

func benchWebhook(b *testing.B) {
	cp := harness.StartT(b, harness.Options{NoDNS: true})
	ctx := context.Background()
	dir := b.TempDir()

	// One CA, two serving certificates: the webhook's and the null handler's.
	ca, err := certs.NewCA("bench-ca", time.Now(), 24*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	write := func(name string, ip string) (string, string) {
		p, err := certs.NewServing(ca, []string{"bench"}, []net.IP{net.ParseIP(ip)}, time.Now(), time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		c, k := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		os.WriteFile(c, p.CertPEM, 0o600)
		os.WriteFile(k, p.KeyPEM, 0o600)
		return c, k
	}
	wc, wk := write("webhook", webhookIP)
	nc, nk := write("null", nullIP)

	nullBin := filepath.Join(dir, "nullserver")
	if out, err := exec.Command("go", "build", "-o", nullBin, "./nullserver").CombinedOutput(); err != nil {
		b.Fatalf("build null server: %v: %s", err, out)
	}
	null, err := harness.StartProcess(cp.Dir, "nullserver", nullBin, []string{"-listen", net.JoinHostPort(nullIP, "8443"), "-cert", nc, "-key", nk}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Stop(5 * time.Second)
	hook := cp.StartWebhook(b, "webhook", webhookIP,
		"--cert-mode=files", "--backfill=false", "--cleanup=false", "--tls-cert-file="+wc, "--tls-key-file="+wk)
	defer hook.Stop(5 * time.Second)
	waitTCP(b, net.JoinHostPort(webhookIP, "8443"))
	waitTCP(b, net.JoinHostPort(nullIP, "8443"))

	// A real Node CREATE review, as the API server sends it.
	nodeRaw, _ := json.Marshal(&corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-23.ec2.internal", Labels: map[string]string{"kubernetes.io/hostname": "ip-10-0-1-23", "node.kubernetes.io/instance-type": "m6i.large", "topology.kubernetes.io/zone": "us-east-1a"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	})
	review, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "705ab4f5-6393-11e8-b7cc-42010a800002", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Operation: admissionv1.Create,
			Object: runtimeRaw(nodeRaw),
		},
	})
	bodyFile := filepath.Join(dir, "review.json")
	os.WriteFile(bodyFile, review, 0o600)

	// Warm both servers, then alternate them round by round so drift hits both.
	runHey(b, "https://"+net.JoinHostPort(webhookIP, "8443")+"/mutate-node", bodyFile, 10, 20)
	runHey(b, "https://"+net.JoinHostPort(nullIP, "8443")+"/mutate-node", bodyFile, 10, 20)
	var hook500, null500, hookMax, nullMax series
	add := func(s *series, r heyResult) {
		s.p50 = append(s.p50, r.p50)
		s.p99 = append(s.p99, r.p99)
		s.rps = append(s.rps, r.rps)
	}
	maxRSS := 0
	for range rounds {
		add(&hook500, runHey(b, "https://"+net.JoinHostPort(webhookIP, "8443")+"/mutate-node", bodyFile, 10, 50))
		add(&null500, runHey(b, "https://"+net.JoinHostPort(nullIP, "8443")+"/mutate-node", bodyFile, 10, 50))
		add(&hookMax, runHey(b, "https://"+net.JoinHostPort(webhookIP, "8443")+"/mutate-node", bodyFile, 50, 0))
		maxRSS = max(maxRSS, hook.StatusKiBT(b, "VmRSS"))
		add(&nullMax, runHey(b, "https://"+net.JoinHostPort(nullIP, "8443")+"/mutate-node", bodyFile, 50, 0))
	}
	hwm := hook.StatusKiBT(b, "VmHWM")

	// kubectl create node through the real API server, with and without the webhook.
	mwcs := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	mwc := harness.WebhookConfig("bench", "https://"+net.JoinHostPort(webhookIP, "8443")+"/mutate-node", nil, ca.CertPEM)
	created := 0
	nextName := func() string { created++; return fmt.Sprintf("bench-%d", created) }
	viaKubectl := func() (time.Duration, bool) {
		manifest := harness.NodeYAML(nextName(), nil)
		start := time.Now()
		out, err := cp.Kubectl(ctx, strings.NewReader(manifest), "create", "-f", "-", "-o", "jsonpath={.metadata.finalizers}")
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		return d, strings.Contains(out, harness.Finalizer)
	}
	viaClient := func() (time.Duration, bool) {
		start := time.Now()
		n, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nextName()}}, metav1.CreateOptions{})
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		return d, slices.Contains(n.Finalizers, harness.Finalizer)
	}
	// waitMutation waits until the API server's view of the configuration is
	// what the phase needs (it picks changes up asynchronously).
	waitMutation := func(want bool) {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			_, got := viaClient()
			return got == want, nil
		})
		if err != nil {
			b.Fatalf("webhook configured=%v never took effect", want)
		}
	}
	var kWith, kWithout, cWith, cWithout []time.Duration
	measure := func(withHook bool) {
		for range 15 {
			d, mutated := viaKubectl()
			if mutated != withHook {
				b.Fatalf("kubectl create: mutated=%v, want %v", mutated, withHook)
			}
			if withHook {
				kWith = append(kWith, d)
			} else {
				kWithout = append(kWithout, d)
			}
		}
		for range 100 {
			d, mutated := viaClient()
			if mutated != withHook {
				b.Fatalf("client create: mutated=%v, want %v", mutated, withHook)
			}
			if withHook {
				cWith = append(cWith, d)
			} else {
				cWithout = append(cWithout, d)
			}
		}
	}
	for range 2 {
		waitMutation(false)
		measure(false)
		if _, err := mwcs.Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitMutation(true)
		measure(true)
		if err := mwcs.Delete(ctx, mwc.Name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}

	r500h, r500n := median(hook500.rps), median(null500.rps)
	rMaxH, rMaxN := median(hookMax.rps), median(nullMax.rps)
	var md strings.Builder
	fmt.Fprintf(&md, "Machine: %d cores (runtime.NumCPU), %s; hey and both servers share it. %d rounds of %s each, alternating webhook and null handler; medians.\n\n", runtime.NumCPU(), memTotal(), rounds, loadTime)
	md.WriteString("| load (hey, TLS keep-alive) | server | req/s | p50 | p99 |\n| --- | --- | --- | --- | --- |\n")
	row := func(load, server string, s series) {
		fmt.Fprintf(&md, "| %s | %s | %.0f | %s | %s |\n", load, server, median(s.rps), ms(median(s.p50)), ms(median(s.p99)))
	}
	row("500 req/s (10 workers × 50)", "webhook", hook500)
	row("500 req/s (10 workers × 50)", "null TLS handler", null500)
	row("max (50 workers)", "webhook", hookMax)
	row("max (50 workers)", "null TLS handler", nullMax)
	fmt.Fprintf(&md, "\nWebhook throughput at max rate: %.0f%% of the null handler (%.0f vs %.0f req/s); at 500 req/s %.0f vs %.0f req/s.\n", 100*rMaxH/rMaxN, rMaxH, rMaxN, r500h, r500n)
	fmt.Fprintf(&md, "Webhook resident memory: %.1f MiB after max-rate load (VmRSS, highest sample), peak %.1f MiB (VmHWM).\n\n", float64(maxRSS)/1024, float64(hwm)/1024)
	md.WriteString("| node creation through the real API server | p50 without webhook | p50 with webhook | added |\n| --- | --- | --- | --- |\n")
	fmt.Fprintf(&md, "| `kubectl create -f -` (%d each) | %s | %s | %s |\n", len(kWith), ms(median(kWithout)), ms(median(kWith)), ms(median(kWith)-median(kWithout)))
	fmt.Fprintf(&md, "| client-go `Create` (%d each) | %s | %s | %s |\n", len(cWith), ms(median(cWithout)), ms(median(cWith)), ms(median(cWith)-median(cWithout)))
	fmt.Println("\n" + md.String())
	b.ReportMetric(rMaxH, "webhook_max_rps")
	b.ReportMetric(100*rMaxH/rMaxN, "pct_of_null")
	b.ReportMetric(float64(median(hook500.p99))/1e6, "webhook_p99_ms@500")
	b.ReportMetric(float64(maxRSS)/1024, "webhook_rss_MiB")
}

func memTotal() string {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "memory unknown"
	}
	f := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])
	kb, _ := strconv.Atoi(f[1])
	return fmt.Sprintf("%.0f GiB RAM", float64(kb)/1024/1024)
}

func waitTCP(b *testing.B, addr string) {
	b.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil {
		b.Fatalf("%s never listened", addr)
	}
}

func runtimeRaw(b []byte) k8sruntime.RawExtension { return k8sruntime.RawExtension{Raw: b} }
