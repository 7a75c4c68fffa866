//go:build e2e

package certmanager_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	release   = harness.ChartRelease
	namespace = "kube-node-ready"
	finalizer = "infra.894.io/node-cleanup"
	// webhook is the chart's name for the webhook's Service, Certificate,
	// MutatingWebhookConfiguration and (with suffix -tls) Secret.
	webhook = release + "-webhook"
)

var (
	c     *harness.Cluster
	chart string
)

func TestChartWithCertManager(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.Kubectl(context.Background(), nil, "logs", "-n", harness.CertManagerNamespace, "-l", "app.kubernetes.io/instance=cert-manager", "--tail=80", "--prefix")
			t.Logf("cert-manager logs:\n%s\nwebhook logs:\n%s", out, webhookLogs(t))
		}
	})
	var issued *issue
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"install", testInstall},
		{"certificate-issued", func(t *testing.T) { issued = testCertificateIssued(t) }},
		{"ca-injected", func(t *testing.T) { testCAInjected(t, issued) }},
		{"webhook-serves-it", func(t *testing.T) { testWebhookServes(t, issued) }},
		{"admission-over-tls", func(t *testing.T) { testAdmission(t, "cm-node-1") }},
		{"renewal", func(t *testing.T) { testRenewal(t, issued) }},
		{"cert-manager-rbac", testCertManagerRBAC},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.Fatalf("step %s failed; later steps build on it", s.name)
		}
	}
}

// testInstall: helm install --wait with certificates.mode cert-manager
// succeeds, which needs the webhook pods Ready, which needs the Secret
// cert-manager writes (it is their volume) and a certificate loaded from it.
func testInstall(t *testing.T) {
	vals, err := c.LocalImageValues("", "certificates: {mode: cert-manager}")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(vals), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.HelmT(t, "install", release, chart, "--namespace", namespace, "--create-namespace", "--values", path, "--wait", "--timeout", "4m")
	t.Logf("helm install --wait took %s", time.Since(start).Round(time.Millisecond))
}

// issue is what cert-manager wrote into the webhook's Secret.
type issue struct {
	cert     *x509.Certificate
	caPEM    []byte
	revision int
}

// testCertificateIssued: the chart's Issuer and Certificate are Ready, and
// the Secret holds tls.crt, tls.key and ca.crt: an ECDSA P-256 certificate
// (the chart's privateKey) for the webhook Service's names, chaining to
// ca.crt, its key matching.
func testCertificateIssued(t *testing.T) *issue {
	c.KubectlOK(t, "", "wait", "-n", namespace, "--for=condition=Ready", "issuer/"+webhook+"-selfsigned", "--timeout=60s")
	c.KubectlOK(t, "", "wait", "-n", namespace, "--for=condition=Ready", "certificate/"+webhook, "--timeout=2m")
	is := readIssue(t)
	svc := webhook + "." + namespace + ".svc"
	for _, name := range []string{svc, svc + ".cluster.local"} {
		if !slices.Contains(is.cert.DNSNames, name) {
			t.Errorf("certificate names %v, want %s", is.cert.DNSNames, name)
		}
	}
	if k, ok := is.cert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("certificate key %T, want ECDSA P-256 (the chart's privateKey)", is.cert.PublicKey)
	}
	if err := verify(is.cert, is.caPEM); err != nil {
		t.Errorf("tls.crt does not chain to ca.crt: %v", err)
	}
	t.Logf("certificate revision %d, serial %s, valid until %s", is.revision, is.cert.SerialNumber, is.cert.NotAfter.Format(time.RFC3339))
	return is
}

// testCAInjected: the CA injector wrote the Secret's ca.crt, byte for byte,
// as the caBundle of the chart's webhook, which carries the inject-ca-from
// annotation naming the Certificate.
func testCAInjected(t *testing.T, is *issue) {
	m, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), webhook, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Annotations["cert-manager.io/inject-ca-from"], namespace+"/"+webhook; got != want {
		t.Errorf("inject-ca-from annotation %q, want %q", got, want)
	}
	harness.Eventually(t, time.Minute, "caBundle injected", func() (bool, string) {
		b := caBundle(t)
		return string(b) == string(is.caPEM), fmt.Sprintf("caBundle %d bytes, ca.crt %d bytes, equal: false", len(b), len(is.caPEM))
	})
}

// testWebhookServes: every webhook pod is Ready and its admission port
// serves the Secret's tls.crt to a client that trusts only the injected
// caBundle and checks the Service name the API server uses.
func testWebhookServes(t *testing.T, is *issue) {
	c.KubectlOK(t, "", "rollout", "status", "-n", namespace, "deployment/"+webhook, "--timeout=2m")
	for _, p := range webhookPods(t) {
		if !ready(&p) {
			t.Errorf("webhook pod %s not Ready", p.Name)
			continue
		}
		leaf, err := served(p.Status.PodIP, caBundle(t))
		if err != nil {
			t.Errorf("webhook pod %s: %v", p.Name, err)
		} else if !leaf.Equal(is.cert) {
			t.Errorf("webhook pod %s serves serial %s, the Secret holds %s", p.Name, leaf.SerialNumber, is.cert.SerialNumber)
		}
	}
}

// testAdmission: a Node created with kubectl comes back from the API server
// already carrying the finalizer — only the admission webhook can have put
// it there before the create returned (the back-fill patches afterwards), and
// with failurePolicy Ignore a failed TLS handshake would have let the Node
// through without it. The webhooks' request counter agrees.
func testAdmission(t *testing.T, node string) {
	before := admissions(t)
	out := c.KubectlOK(t, harness.NodeYAML(node, nil), "create", "-f", "-", "-o", "json")
	var created corev1.Node
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("kubectl create node: %v\n%s", err, out)
	}
	if !slices.Contains(created.Finalizers, finalizer) {
		t.Fatalf("node %s created with finalizers %v: the admission webhook was not called or failed (webhook logs:\n%s)", node, created.Finalizers, webhookLogs(t))
	}
	harness.Eventually(t, 30*time.Second, "webhook counted the admission", func() (bool, string) {
		after := admissions(t)
		return after > before, fmt.Sprintf("node_cleanup_webhook_requests_total{operation=CREATE,result=patched}: %v before, %v after", before, after)
	})
	t.Cleanup(func() {
		_, _ = c.Kubectl(context.Background(), nil, "delete", "node", node, "--wait=false")
	})
}

// testRenewal: cert-manager re-issues the certificate on request (what
// `cmctl renew` does: the Certificate's Issuing condition set to True);
// rotationPolicy Always gives a new key, and with the chart's self-signed
// Issuer a new CA. The CA injector adds the new CA to the caBundle and keeps
// the old one until it expires, so admission works all through the rollover:
// before the webhooks load the new files (a Node created then still gets
// the finalizer) and after — the kubelet updates the pods' Secret volume and
// the webhooks load it without restarting.
func testRenewal(t *testing.T, old *issue) {
	pods := map[string]corev1.Pod{}
	for _, p := range webhookPods(t) {
		pods[p.Name] = p
	}
	start := time.Now()
	renew := fmt.Sprintf(`[{"op":"add","path":"/status/conditions/-","value":{"type":"Issuing","status":"True","reason":"ManuallyTriggered","message":"renewal requested by the kube-node-ready test","lastTransitionTime":%q}}]`,
		time.Now().UTC().Format(time.RFC3339))
	c.KubectlOK(t, "", "patch", "certificate", webhook, "-n", namespace, "--subresource=status", "--type=json", "-p", renew)

	var is *issue
	harness.Eventually(t, 2*time.Minute, "certificate re-issued", func() (bool, string) {
		is = readIssue(t)
		return is.revision > old.revision && !is.cert.Equal(old.cert), fmt.Sprintf("revision %d, serial %s (was %d, %s)", is.revision, is.cert.SerialNumber, old.revision, old.cert.SerialNumber)
	})
	issued := time.Since(start)
	if is.cert.PublicKey.(*ecdsa.PublicKey).Equal(old.cert.PublicKey) {
		t.Errorf("renewed certificate kept the old key; the chart asks for rotationPolicy Always")
	}
	if string(is.caPEM) == string(old.caPEM) {
		t.Fatalf("the self-signed Issuer's renewal kept ca.crt; this test expects a new CA")
	}
	c.KubectlOK(t, "", "wait", "-n", namespace, "--for=condition=Ready", "certificate/"+webhook, "--timeout=60s")
	harness.Eventually(t, time.Minute, "new CA injected beside the old one", func() (bool, string) {
		b := caBundle(t)
		return bundleHas(b, is.caPEM) && bundleHas(b, old.caPEM), fmt.Sprintf("caBundle holds the new CA: %v, the old CA: %v", bundleHas(b, is.caPEM), bundleHas(b, old.caPEM))
	})
	injected := time.Since(start)
	var serving []string
	for name, p := range pods {
		if leaf, err := served(p.Status.PodIP, caBundle(t)); err != nil {
			t.Errorf("webhook pod %s during the rollover: %v", name, err)
		} else {
			serving = append(serving, fmt.Sprintf("%s serves the %s certificate", name, map[bool]string{true: "new", false: "old"}[leaf.Equal(is.cert)]))
		}
	}
	t.Logf("rollover, caBundle with both CAs: %s", strings.Join(serving, ", "))
	testAdmission(t, "cm-node-2")

	harness.Eventually(t, 3*time.Minute, "every webhook pod serving the renewed certificate", func() (bool, string) {
		var stale []string
		for name, p := range pods {
			leaf, err := served(p.Status.PodIP, is.caPEM)
			if err != nil || !leaf.Equal(is.cert) {
				stale = append(stale, fmt.Sprintf("%s (%v)", name, err))
			}
		}
		return len(stale) == 0, "not serving the renewed certificate: " + strings.Join(stale, ", ")
	})
	t.Logf("renewal: re-issued after %s, new CA injected after %s, every webhook serving the new certificate after %s",
		issued.Round(time.Millisecond), injected.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	for _, p := range webhookPods(t) {
		was, ok := pods[p.Name]
		if !ok {
			t.Errorf("webhook pod %s is new: the webhook was replaced, not reloaded", p.Name)
			continue
		}
		if restarts(&p) != restarts(&was) {
			t.Errorf("webhook pod %s restarted during the renewal (%d -> %d restarts)", p.Name, restarts(&was), restarts(&p))
		}
	}
	testAdmission(t, "cm-node-3")
}

// bundleHas reports whether every certificate of certsPEM is in bundle.
func bundleHas(bundle, certsPEM []byte) bool {
	have := map[string]bool{}
	for _, c := range pemCerts(bundle) {
		have[string(c)] = true
	}
	want := pemCerts(certsPEM)
	for _, c := range want {
		if !have[string(c)] {
			return false
		}
	}
	return len(want) > 0
}

// pemCerts are the DER certificates of a PEM bundle.
func pemCerts(b []byte) [][]byte {
	var out [][]byte
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return out
		}
		if blk.Type == "CERTIFICATE" {
			out = append(out, blk.Bytes)
		}
	}
}

// testCertManagerRBAC: the RBAC written for cert-manager was enough: no
// request of either component was forbidden, and neither restarted.
func testCertManagerRBAC(t *testing.T) {
	logs := c.KubectlOK(t, "", "logs", "-n", harness.CertManagerNamespace, "-l", "app.kubernetes.io/instance=cert-manager", "--tail=-1", "--prefix")
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(strings.ToLower(l), "forbidden") {
			t.Errorf("cert-manager was refused: %s", l)
		}
	}
	pods, err := c.Client.CoreV1().Pods(harness.CertManagerNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if n := restarts(&p); n != 0 {
			t.Errorf("cert-manager pod %s restarted %d times", p.Name, n)
		}
	}
}

// readIssue reads the webhook's Secret and the Certificate's revision.
func readIssue(t *testing.T) *issue {
	t.Helper()
	s, err := c.Client.CoreV1().Secrets(namespace).Get(t.Context(), webhook+"-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Secret cert-manager writes: %v", err)
	}
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("secret type %s, want %s", s.Type, corev1.SecretTypeTLS)
	}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(s.Data[k]) == 0 {
			t.Fatalf("secret %s has no %s (keys: %v)", s.Name, k, keys(s.Data))
		}
	}
	pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		t.Fatalf("tls.crt and tls.key: %v", err)
	}
	rev := c.KubectlOK(t, "", "get", "certificate", webhook, "-n", namespace, "-o", "jsonpath={.status.revision}")
	n, _ := strconv.Atoi(strings.TrimSpace(rev))
	return &issue{cert: pair.Leaf, caPEM: s.Data["ca.crt"], revision: n}
}

func verify(cert *x509.Certificate, caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %q", caPEM)
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: webhook + "." + namespace + ".svc"})
	return err
}

// served completes a TLS handshake with a webhook pod's admission port the
// way the API server does (trusting caBundle alone, server name
// <service>.<namespace>.svc) and returns the certificate it served.
func served(podIP string, caBundle []byte) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return nil, fmt.Errorf("caBundle holds no certificate")
	}
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(podIP, strconv.Itoa(harness.WebhookPort)), &tls.Config{
		RootCAs: pool, ServerName: webhook + "." + namespace + ".svc", MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func caBundle(t *testing.T) []byte {
	t.Helper()
	m, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), webhook, metav1.GetOptions{})
	if err != nil || len(m.Webhooks) == 0 {
		t.Fatalf("webhook configuration %s: %v", webhook, err)
	}
	return m.Webhooks[0].ClientConfig.CABundle
}

func webhookPods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app=kube-node-ready-webhook"})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no webhook pods")
	}
	return out
}

// admissions sums the webhook pods' patched Node CREATE admissions.
func admissions(t *testing.T) float64 {
	t.Helper()
	var sum float64
	for _, p := range webhookPods(t) {
		v, err := harness.ScrapeMetric("http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(harness.MetricsPort))+"/metrics",
			"node_cleanup_webhook_requests_total", `operation="CREATE"`, `result="patched"`)
		if err != nil {
			t.Fatalf("metrics of webhook pod %s: %v", p.Name, err)
		}
		sum += v
	}
	return sum
}

func webhookLogs(t *testing.T) string {
	out, _ := c.Kubectl(context.Background(), nil, "logs", "-n", namespace, "-l", "app=kube-node-ready-webhook", "--tail=30", "--prefix")
	return out
}

func ready(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
