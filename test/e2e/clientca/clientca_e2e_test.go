//go:build e2e

package clientca

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/certs"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	trustingIP = "10.213.0.41" // the webhook whose --client-ca signed the API server's certificate
	otherIP    = "10.213.0.42" // the webhook whose --client-ca did not
	otherLabel = "e2e.kube-node-ready/other-client-ca"
	otherHook  = "other-client-ca.infra.894.io"
	// handshakeError is what net/http logs (at debug level, through the
	// webhook's slog ErrorLog) when a client certificate does not verify.
	handshakeError = "TLS handshake error"
)

var (
	cp *harness.ControlPlane
	// clientCA signed the certificate the API server presents to webhooks.
	clientCA certs.KeyPair
)

// apiserverClientCert makes clientCA and the certificate it signs for the API server.
func apiserverClientCert() (harness.ClientCert, error) {
	ca, err := certs.NewCA("e2e-apiserver-client-ca", time.Now(), 24*time.Hour)
	if err != nil {
		return harness.ClientCert{}, err
	}
	client, err := newClientCert(ca, "kube-apiserver")
	if err != nil {
		return harness.ClientCert{}, fmt.Errorf("the API server's client certificate: %w", err)
	}
	clientCA = ca
	return harness.ClientCert{CertPEM: client.CertPEM, KeyPEM: client.KeyPEM}, nil
}

func TestClientCA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	servingCA := mustCA(t, "e2e-serving-ca")
	otherCA := mustCA(t, "e2e-other-client-ca")

	start := func(name, ip string, caPEM []byte) *harness.Daemon {
		t.Helper()
		serving, err := certs.NewServing(servingCA, []string{name + ".e2e"}, []net.IP{net.ParseIP(ip)}, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile, caFile := writeFile(t, dir, name+".crt", serving.CertPEM), writeFile(t, dir, name+".key", serving.KeyPEM), writeFile(t, dir, name+"-client-ca.crt", caPEM)
		w := cp.StartWebhook(t, name, ip, "--cert-mode=files", "--backfill=false", "--cleanup=false",
			"--tls-cert-file="+certFile, "--tls-key-file="+keyFile, "--client-ca="+caFile, "--log-level=debug")
		w.WaitReady(t, 10*time.Second)
		return w
	}
	trusting := start("webhook-trusting", trustingIP, clientCA.CertPEM)
	other := start("webhook-other-ca", otherIP, otherCA.CertPEM)

	mwcs := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := mwcs.Create(ctx, harness.WebhookConfig("knr-e2e-client-ca", "https://"+net.JoinHostPort(trustingIP, "8443")+"/mutate-node", &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: otherLabel, Operator: metav1.LabelSelectorOpDoesNotExist}},
	}, servingCA.CertPEM), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	otherConfig := harness.WebhookConfig("knr-e2e-other-client-ca", "https://"+net.JoinHostPort(otherIP, "8443")+"/mutate-node", &metav1.LabelSelector{
		MatchLabels: map[string]string{otherLabel: "true"},
	}, servingCA.CertPEM)
	otherConfig.Webhooks[0].Name = otherHook // the API server's metrics name webhooks by this
	if _, err := mwcs.Create(ctx, otherConfig, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("without a client certificate the webhook refuses", func(t *testing.T) {
		// The control for the next subtest: a finalizer there can only come
		// from the API server presenting a certificate the webhook verified.
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(servingCA.CertPEM)}}}
		resp, err := hc.Post("https://"+net.JoinHostPort(trustingIP, "8443")+"/mutate-node", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("a client without a certificate got HTTP %d, want a failed handshake", resp.StatusCode)
		}
		if !strings.Contains(err.Error(), "certificate required") {
			t.Errorf("error = %v, want the server's 'certificate required' alert", err)
		}
		if got := trusting.Metric(t, "node_cleanup_webhook_requests_total"); got != 0 {
			t.Errorf("requests_total = %v after a refused handshake, want 0", got)
		}
	})

	t.Run("the API server's client certificate is accepted", func(t *testing.T) {
		// The API server picks new configurations up asynchronously: create
		// nodes with the real kubectl until one is mutated.
		n := 0
		var finalizers string
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			n++
			finalizers = cp.KubectlT(t, harness.NodeYAML(fmt.Sprintf("trusted-%d", n), nil), "create", "-f", "-", "-o", "jsonpath={.metadata.finalizers}")
			return strings.Contains(finalizers, harness.Finalizer), nil
		}); err != nil {
			t.Fatalf("no node created with kubectl got %s (last finalizers %q):\n%s", harness.Finalizer, finalizers, trusting.Tail(20))
		}
		if got := cp.GetNode(t, fmt.Sprintf("trusted-%d", n)).Finalizers; !slices.Equal(got, []string{harness.Finalizer}) {
			t.Errorf("stored finalizers = %v, want [%s]", got, harness.Finalizer)
		}
		if got := trusting.Metric(t, "node_cleanup_webhook_requests_total", `operation="CREATE"`, `result="patched"`); got < 1 {
			t.Errorf("requests_total{CREATE,patched} = %v, want at least 1", got)
		}
	})

	t.Run("a webhook trusting another CA rejects the handshake and creation still succeeds", func(t *testing.T) {
		n := 0
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			n++
			cp.KubectlT(t, harness.NodeYAML(fmt.Sprintf("untrusted-%d", n), map[string]string{otherLabel: "true"}), "create", "-f", "-")
			failedOpen, err := apiserverMetric(ctx, "apiserver_admission_webhook_fail_open_count", `name="`+otherHook+`"`)
			return failedOpen >= 1, err
		}); err != nil {
			t.Fatalf("the API server never failed open on %s: %v\n%s", otherHook, err, other.Tail(20))
		}
		for i := 1; i <= n; i++ {
			if got := cp.GetNode(t, fmt.Sprintf("untrusted-%d", i)).Finalizers; len(got) != 0 {
				t.Errorf("untrusted-%d has finalizers %v, want none", i, got)
			}
		}
		if got := other.Metric(t, "node_cleanup_webhook_requests_total"); got != 0 {
			t.Errorf("the other-CA webhook served %v requests, want 0", got)
		}
		rejected := logLines(t, other, handshakeError)
		if len(rejected) == 0 {
			t.Fatalf("the other-CA webhook logged no %q:\n%s", handshakeError, other.Tail(20))
		}
		if !strings.Contains(rejected[0], "certificate signed by unknown authority") {
			t.Errorf("rejection = %s, want an unknown-authority verification failure", rejected[0])
		}
		t.Logf("the other-CA webhook logged %d rejected handshakes, e.g. %s", len(rejected), rejected[0])
		if got := logLines(t, trusting, handshakeError); len(got) != 1 {
			// The one refused handshake is the test's own, certificate-less client.
			t.Errorf("the trusting webhook logged %d handshake errors, want 1: %q", len(got), got)
		}
	})
}

// newClientCert issues a client-auth certificate from ca: internal/webhook/certs
// only issues CAs and serving certificates, which Go's TLS server refuses
// as client certificates.
func newClientCert(ca certs.KeyPair, commonName string) (certs.KeyPair, error) {
	caPair, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		return certs.KeyPair{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certs.KeyPair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return certs.KeyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return certs.KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-5 * time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caPair.Leaf, &key.PublicKey, caPair.PrivateKey)
	if err != nil {
		return certs.KeyPair{}, err
	}
	return certs.KeyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}, nil
}

func mustCA(t *testing.T, name string) certs.KeyPair {
	t.Helper()
	ca, err := certs.NewCA(name, time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func pool(pemCerts []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemCerts)
	return p
}

// apiserverMetric sums the API server's samples of name whose labels contain all of match.
func apiserverMetric(ctx context.Context, name string, match ...string) (float64, error) {
	body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("scrape the API server: %w", err)
	}
	return harness.SumMetric(bytes.NewReader(body), name, match...)
}

// logLines returns the lines of w's whole log that contain s.
func logLines(t *testing.T, w *harness.Daemon, s string) []string {
	t.Helper()
	text, err := w.Log()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}
