// Package webhookenv runs the real kube-node-ready-webhook binary on a
// harness control plane and holds the helpers the webhook and cleanup
// end-to-end tests and benchmarks share: start a process on its own address,
// wait for /readyz, scrape a metric, register a MutatingWebhookConfiguration,
// run real kubectl, cut it off from the API server through a Proxy.
package webhookenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// Finalizer is the finalizer the webhook manages by default.
const Finalizer = "infra.894.io/node-cleanup"

// Binary is the real binary built by `make build`.
func Binary(t testing.TB) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "kube-node-ready-webhook")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s missing: run `make build` first: %v", bin, err)
	}
	return bin
}

// Proc is one running kube-node-ready-webhook.
type Proc struct {
	*harness.Process
	// IP is the address its admission (:8443) and metrics (:8080) ports listen on.
	IP string
}

// Start runs the webhook with its ports on ip and args after them; it is
// stopped when the test ends (its log tail printed if the test failed).
func Start(t testing.TB, dir, name, ip string, args ...string) *Proc {
	t.Helper()
	all := append([]string{
		"--listen-address=" + ip + ":8443",
		"--metrics-address=" + ip + ":8080",
	}, args...)
	p, err := harness.StartProcess(dir, name, Binary(t), all, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &Proc{Process: p, IP: ip}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Tail(60))
		}
		_ = p.Stop(10 * time.Second)
	})
	return w
}

// WaitReady waits for /readyz; the process dying fails the test with its log.
func (w *Proc) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if exited, _ := w.Exited(); exited {
			return false, w.ExitError()
		}
		resp, err := hc.Get("http://" + w.IP + ":8080/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("%s not ready: %v", w.Name, err)
	}
}

// Metric sums every sample of name whose labels contain all of match.
func (w *Proc) Metric(t testing.TB, name string, match ...string) float64 {
	t.Helper()
	v, err := w.TryMetric(name, match...)
	if err != nil {
		t.Fatalf("scrape %s: %v", w.Name, err)
	}
	return v
}

// TryMetric is Metric for polling loops: an error instead of a failed test.
func (w *Proc) TryMetric(name string, match ...string) (float64, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + w.IP + ":8080/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return SumMetric(resp.Body, name, match...)
}

// SumMetric sums the samples of name in a Prometheus text exposition whose
// labels contain all of match.
func SumMetric(r io.Reader, name string, match ...string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(line, m)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// WebhookConfig is the MutatingWebhookConfiguration the chart installs, for
// nodes CREATE, calling url.
func WebhookConfig(name, url string, selector *metav1.LabelSelector, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "node-cleanup.infra.894.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url), CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"},
					Scope: ptr.To(admissionregistrationv1.ClusterScope),
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](2),
			AdmissionReviewVersions: []string{"v1"},
			ObjectSelector:          selector,
		}},
	}
}

// Kubectl runs the real kubectl as the admin with stdin, failing the test on error.
func Kubectl(t testing.TB, cp *harness.ControlPlane, stdin string, args ...string) string {
	t.Helper()
	out, err := TryKubectl(cp, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %v: %v: %s", args, err, out)
	}
	return out
}

// TryKubectl runs the real kubectl as the admin and returns its combined output.
func TryKubectl(cp *harness.ControlPlane, stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig, "--request-timeout=10s"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// NodeYAML is a Node manifest for kubectl.
func NodeYAML(name string, labels map[string]string, finalizers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n", name)
	if len(labels) > 0 {
		b.WriteString("  labels:\n")
		for k, v := range labels {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	if len(finalizers) > 0 {
		b.WriteString("  finalizers:\n")
		for _, f := range finalizers {
			fmt.Fprintf(&b, "  - %s\n", f)
		}
	}
	return b.String()
}
