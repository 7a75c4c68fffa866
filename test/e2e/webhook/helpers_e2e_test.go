//go:build e2e

package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	fin        = "infra.894.io/node-cleanup"
	skipLabel  = "e2e.kube-node-ready/skip-admission" // nodes with it bypass every webhook
	filesLabel = "e2e.kube-node-ready/files-webhook"  // nodes with it go to the files-mode webhook
)

// webhookBinary is the real binary built by `make build`.
func webhookBinary(t *testing.T) string {
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

// webhookProc is one running kube-node-ready-webhook.
type webhookProc struct {
	*harness.Process
	ip string
}

func startWebhook(t *testing.T, dir, name, ip string, args ...string) *webhookProc {
	t.Helper()
	all := append([]string{
		"--listen-address=" + ip + ":8443",
		"--metrics-address=" + ip + ":8080",
	}, args...)
	p, err := harness.StartProcess(dir, name, webhookBinary(t), all, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &webhookProc{Process: p, ip: ip}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Tail(40))
		}
		_ = p.Stop(10 * time.Second)
	})
	return w
}

// waitReady waits for /readyz; the process dying fails the test with its log.
func (w *webhookProc) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if exited, _ := w.Exited(); exited {
			return false, w.ExitError()
		}
		resp, err := hc.Get("http://" + w.ip + ":8080/readyz")
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

// metric sums every sample of name whose labels contain all of match.
func (w *webhookProc) metric(t *testing.T, name string, match ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + w.ip + ":8080/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", w.Name, err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
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
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

func webhookConfig(name, url string, selector *metav1.LabelSelector, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
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

func kubectl(t *testing.T, cp *harness.ControlPlane, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig, "--request-timeout=10s"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v: %s", args, err, out)
	}
	return string(out)
}

func nodeYAML(name string, labels map[string]string, finalizers ...string) string {
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

func getNode(t *testing.T, cp *harness.ControlPlane, name string) *corev1.Node {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// waitFinalizer polls until the node carries the finalizer or timeout passes.
func waitFinalizer(t *testing.T, cp *harness.ControlPlane, name string, timeout time.Duration) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		n, err = cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return slices.Contains(n.Finalizers, fin), nil
	})
	if err != nil {
		t.Fatalf("node %s never got %s (finalizers %v): %v", name, fin, n.GetFinalizers(), err)
	}
	return n
}

// tlsProxy forwards TCP from listen to target and can cut every connection,
// which looks to its clients like the target became unreachable.
type tlsProxy struct {
	listen, target string
	mu             sync.Mutex
	ln             net.Listener
	conns          map[net.Conn]struct{}
}

func (p *tlsProxy) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.listen)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	if p.conns == nil {
		p.conns = map[net.Conn]struct{}{}
	}
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *tlsProxy) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// cut closes the listener and every open connection.
func (p *tlsProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// kubeconfigVia writes an admin kubeconfig that reaches the API server through addr.
func kubeconfigVia(t *testing.T, cp *harness.ControlPlane, addr, path string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthority: cp.CAFile, TLSServerName: "kubernetes.default.svc"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cp.Config.BearerToken}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// servedSerial opens a new TLS connection to addr and returns the serial of
// the certificate presented, verified against roots.
func servedSerial(addr string, roots *x509.CertPool) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}
