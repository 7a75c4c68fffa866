//go:build e2e

package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/certs"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	selfIP    = "10.213.0.3"       // the self-managed webhook
	filesIP   = "10.213.0.4"       // the files-mode webhook
	pendingIP = "10.213.0.5"       // a webhook that cannot reach the API server
	proxyAddr = "10.213.0.10:6443" // the API server holds :443 on every address
	mwcSelf   = "knr-e2e-self"
	mwcFiles  = "knr-e2e-files"
)

func TestWebhook(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	top := t // processes that outlive a subtest are tied to the whole test
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nodes := cp.Client.CoreV1().Nodes()
	mwcs := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()

	// The self-managed webhook reaches the API server through a proxy the test can cut.
	proxy := harness.StartProxy(t, proxyAddr, net.JoinHostPort(harness.APIServerIP, "443"))
	selfKubeconfig := harness.KubeconfigVia(t, cp.Kubeconfig, proxyAddr, filepath.Join(cp.Dir, "webhook-via-proxy.kubeconfig"))

	// Registered without a caBundle: the webhook writes it.
	_, err := mwcs.Create(ctx, harness.WebhookConfig(mwcSelf, "https://"+net.JoinHostPort(selfIP, "8443")+"/mutate-node", &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: skipLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: filesLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
		},
	}, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selfArgs := []string{
		"--kubeconfig=" + selfKubeconfig, "--namespace=kube-system", "--extra-sans=" + selfIP,
		"--webhook-config-name=" + mwcSelf, "--log-level=debug",
	}
	self := cp.StartWebhook(t, "webhook-self", selfIP, selfArgs...)
	self.WaitReady(t, 30*time.Second)

	var caBundle []byte
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		cfg, err := mwcs.Get(ctx, mwcSelf, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		caBundle = cfg.Webhooks[0].ClientConfig.CABundle
		return len(caBundle) > 0, nil
	}); err != nil {
		t.Fatalf("the webhook never wrote the caBundle: %v", err)
	}
	sec, err := cp.Client.CoreV1().Secrets("kube-system").Get(ctx, harness.WebhookCertSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("self-managed Secret: %v", err)
	}
	if !bytes.Equal(sec.Data[certs.SecretBundle], caBundle) {
		t.Errorf("caBundle in the configuration differs from the Secret's bundle")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caBundle)
	if _, err := servedSerial(net.JoinHostPort(selfIP, "8443"), roots); err != nil {
		t.Fatalf("the served certificate does not verify against the written caBundle: %v", err)
	}

	// The API server picks configuration changes up asynchronously: wait
	// until a creation is actually mutated.
	probe := 0
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		probe++
		n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", probe)}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return slices.Contains(n.Finalizers, fin), nil
	}); err != nil {
		t.Fatalf("the API server never called the webhook successfully: %v", err)
	}

	t.Run("kubectl create node gets the finalizer", func(t *testing.T) {
		cp.KubectlT(t, harness.NodeYAML("kubectl-node", nil), "create", "-f", "-")
		n := cp.GetNode(t, "kubectl-node")
		if !slices.Equal(n.Finalizers, []string{fin}) {
			t.Errorf("finalizers = %v, want [%s]", n.Finalizers, fin)
		}
	})

	t.Run("other finalizers are kept and ours is added once", func(t *testing.T) {
		tests := []struct {
			name string
			have []string
			want []string
		}{
			{"others", []string{"example.com/a", "example.com/b"}, []string{"example.com/a", "example.com/b", fin}},
			{"ours already", []string{fin}, []string{fin}},
			{"ours among others", []string{"example.com/a", fin}, []string{"example.com/a", fin}},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := fmt.Sprintf("finalizers-%d", i)
				cp.KubectlT(t, harness.NodeYAML(name, nil, tt.have...), "create", "-f", "-")
				if got := cp.GetNode(t, name).Finalizers; !slices.Equal(got, tt.want) {
					t.Errorf("finalizers = %v, want %v", got, tt.want)
				}
			})
		}
	})

	t.Run("status updates and updates are never sent", func(t *testing.T) {
		before := self.Metric(t, "node_cleanup_webhook_requests_total")
		n := cp.GetNode(t, "kubectl-node")
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		n, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels = map[string]string{"updated": "yes"}
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		cp.KubectlT(t, "", "label", "node", "kubectl-node", "relabelled=yes")
		cp.KubectlT(t, "", "patch", "node", "kubectl-node", "--subresource=status", "--type=merge", "-p", `{"status":{"capacity":{"pods":"10"}}}`)
		if after := self.Metric(t, "node_cleanup_webhook_requests_total"); after != before {
			t.Errorf("webhook received %v requests for status updates and updates, want 0", after-before)
		}
		if got := self.Metric(t, "node_cleanup_webhook_requests_total", `operation="UPDATE"`); got != 0 {
			t.Errorf("requests_total{operation=UPDATE} = %v, want 0", got)
		}
		// The same scrape does see a CREATE, so the counter above is live.
		cp.KubectlT(t, harness.NodeYAML("after-updates", nil), "create", "-f", "-")
		if after := self.Metric(t, "node_cleanup_webhook_requests_total", `operation="CREATE"`, `result="patched"`); after < 1 {
			t.Errorf("requests_total{CREATE,patched} = %v after a create", after)
		}
	})

	t.Run("back-fill covers nodes admission skipped", func(t *testing.T) {
		cp.KubectlT(t, harness.NodeYAML("skipped", map[string]string{skipLabel: "true"}, "example.com/keep"), "create", "-f", "-", "-o", "name")
		n := waitFinalizer(t, cp, "skipped", 5*time.Second)
		if !slices.Equal(n.Finalizers, []string{"example.com/keep", fin}) {
			t.Errorf("finalizers = %v, want [example.com/keep %s]", n.Finalizers, fin)
		}
		list, err := nodes.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, n := range list.Items {
			if slices.Contains(n.Finalizers, fin) {
				want++
			}
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return self.Metric(t, "node_cleanup_nodes_with_finalizer") == float64(want), nil
		}); err != nil {
			t.Errorf("node_cleanup_nodes_with_finalizer = %v, want %d", self.Metric(t, "node_cleanup_nodes_with_finalizer"), want)
		}
	})

	t.Run("webhook down: creation succeeds without the finalizer, back-fill adds it on restart", func(t *testing.T) {
		if err := self.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		out := cp.KubectlT(t, harness.NodeYAML("while-down", nil), "create", "-f", "-", "-o", "jsonpath={.metadata.finalizers}")
		if strings.Contains(out, fin) {
			t.Fatalf("node created while the webhook was down has the finalizer: %s", out)
		}
		if got := cp.GetNode(t, "while-down").Finalizers; slices.Contains(got, fin) {
			t.Fatalf("finalizers = %v right after creation with the webhook down", got)
		}
		self = cp.StartWebhook(top, "webhook-self-restarted", selfIP, selfArgs...)
		waitFinalizer(t, cp, "while-down", 5*time.Second)
		self.WaitReady(t, 10*time.Second)
	})

	t.Run("API server unreachable: admission keeps serving, back-fill resumes", func(t *testing.T) {
		proxy.Cut()
		// The API server still calls the webhook; the webhook cannot call back.
		n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "while-cut"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(n.Finalizers, fin) {
			t.Errorf("admission while the webhook cannot reach the API server: finalizers = %v", n.Finalizers)
		}
		skipped, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "skipped-while-cut", Labels: map[string]string{skipLabel: "true"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(skipped.Finalizers, fin) {
			t.Fatalf("bypassed node has the finalizer at creation")
		}
		if got := cp.GetNode(t, "skipped-while-cut").Finalizers; slices.Contains(got, fin) {
			t.Fatalf("back-fill reached the API server through a cut proxy: %v", got)
		}
		proxy.Restore(t)
		waitFinalizer(t, cp, "skipped-while-cut", 60*time.Second)
	})

	t.Run("files mode: rotated certificate files keep the API server calling", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		ca1 := mustCA(t)
		write := func(p certs.KeyPair) {
			t.Helper()
			// Written one file after the other, like a careless rotation:
			// the webhook may see a mismatched pair in between and must keep serving.
			for path, b := range map[string][]byte{certFile: p.CertPEM, keyFile: p.KeyPEM} {
				if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(path+".tmp", path); err != nil {
					t.Fatal(err)
				}
			}
		}
		leaf1 := mustServing(t, ca1)
		write(leaf1)
		if _, err := mwcs.Create(ctx, harness.WebhookConfig(mwcFiles, "https://"+net.JoinHostPort(filesIP, "8443")+"/mutate-node", &metav1.LabelSelector{
			MatchLabels: map[string]string{filesLabel: "true"},
		}, ca1.CertPEM), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		files := cp.StartWebhook(t, "webhook-files", filesIP, "--cert-mode=files", "--backfill=false", "--cleanup=false",
			"--tls-cert-file="+certFile, "--tls-key-file="+keyFile, "--tls-reload-interval=200ms")
		files.WaitReady(t, 10*time.Second)

		created := 0
		createMutated := func(t *testing.T, timeout time.Duration) {
			t.Helper()
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
				created++
				n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("files-%d", created), Labels: map[string]string{filesLabel: "true"},
				}}, metav1.CreateOptions{})
				if err != nil {
					return false, err
				}
				return slices.Contains(n.Finalizers, fin), nil
			}); err != nil {
				t.Fatalf("the API server did not get the finalizer from the files-mode webhook: %v", err)
			}
		}
		waitServed := func(t *testing.T, roots *x509.CertPool, want certs.KeyPair) {
			t.Helper()
			wantSerial := serialOf(t, want)
			var got string
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				got, _ = servedSerial(net.JoinHostPort(filesIP, "8443"), roots)
				return got == wantSerial, nil
			}); err != nil {
				t.Fatalf("a new handshake presents serial %s, want %s", got, wantSerial)
			}
		}
		roots1 := pool(ca1.CertPEM)
		createMutated(t, 20*time.Second)
		patched := files.Metric(t, "node_cleanup_webhook_requests_total", `result="patched"`)

		// Same CA, new leaf.
		leaf2 := mustServing(t, ca1)
		write(leaf2)
		waitServed(t, roots1, leaf2)
		createMutated(t, 5*time.Second)

		// Broken files: the previous certificate keeps serving.
		if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return strings.Contains(files.Tail(20), "certificate reload failed"), nil
		}); err != nil {
			t.Fatalf("no reload error logged for a garbage certificate file")
		}
		waitServed(t, roots1, leaf2)
		createMutated(t, 5*time.Second)

		// CA rollover: trust both CAs first, then serve a leaf of the new CA.
		ca2 := mustCA(t)
		cfg, err := mwcs.Get(ctx, mwcFiles, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Webhooks[0].ClientConfig.CABundle = append(append([]byte{}, ca2.CertPEM...), ca1.CertPEM...)
		if _, err := mwcs.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		leaf3 := mustServing(t, ca2)
		write(leaf3)
		waitServed(t, pool(ca2.CertPEM), leaf3)
		createMutated(t, 10*time.Second)

		if after := files.Metric(t, "node_cleanup_webhook_requests_total", `result="patched"`); after < patched+3 {
			t.Errorf("files webhook patched %v requests after the first, want at least 3 more", after-patched)
		}
	})

	t.Run("bad input over TLS never panics or denies", func(t *testing.T) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		post := func(t *testing.T, body []byte) (int, []byte) {
			resp, err := hc.Post("https://"+net.JoinHostPort(selfIP, "8443")+"/mutate-node", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatalf("post: %v", err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			return resp.StatusCode, buf.Bytes()
		}
		node := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}`
		review := func(version, uid, resource, op string) []byte {
			return []byte(fmt.Sprintf(`{"apiVersion":%q,"kind":"AdmissionReview","request":{"uid":%q,"kind":{"version":"v1","kind":"Node"},"resource":{"version":"v1","resource":%q},"operation":%q,"object":%s}}`, version, uid, resource, op, node))
		}
		tests := []struct {
			name       string
			body       []byte
			wantStatus int
			wantPatch  bool
		}{
			{"well-formed", review("admission.k8s.io/v1", "u1", "nodes", "CREATE"), 200, true},
			{"malformed JSON", []byte(`{"apiVersion": "admission.k8s.io/v1", "kind": `), 400, false},
			{"wrong API version", review("admission.k8s.io/v9", "u2", "nodes", "CREATE"), 400, false},
			{"another kind", review("admission.k8s.io/v1", "u3", "pods", "CREATE"), 200, false},
			{"missing UID", review("admission.k8s.io/v1", "", "nodes", "CREATE"), 200, false},
			{"update", review("admission.k8s.io/v1", "u5", "nodes", "UPDATE"), 200, false},
			{"object with only a case-variant Metadata", bytes.Replace(review("admission.k8s.io/v1", "u6", "nodes", "CREATE"), []byte(`"metadata"`), []byte(`"Metadata"`), 1), 200, true},
			{"not an AdmissionReview", []byte(node), 400, false},
			{"enormous body", append(review("admission.k8s.io/v1", "u4", "nodes", "CREATE"), bytes.Repeat([]byte(" "), 4<<20)...), 413, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				status, body := post(t, tt.body)
				if status != tt.wantStatus {
					t.Fatalf("status = %d, want %d: %s", status, tt.wantStatus, body)
				}
				if status != 200 {
					return
				}
				var rev struct {
					Response struct {
						Allowed bool   `json:"allowed"`
						Patch   []byte `json:"patch"`
					} `json:"response"`
				}
				if err := json.Unmarshal(body, &rev); err != nil {
					t.Fatalf("answer: %v: %s", err, body)
				}
				if !rev.Response.Allowed || (len(rev.Response.Patch) > 0) != tt.wantPatch {
					t.Errorf("allowed=%v patch=%s, want allowed, patch=%v", rev.Response.Allowed, rev.Response.Patch, tt.wantPatch)
				}
			})
		}
		if exited, _ := self.Exited(); exited {
			t.Fatal("webhook died on bad input")
		}
		if got := self.Metric(t, "node_cleanup_webhook_requests_total", `result="panic"`); got != 0 {
			t.Errorf("panics = %v", got)
		}
	})

	t.Run("replicas converge on one Secret", func(t *testing.T) {
		const replicas = 4
		stores := make([]*certs.Store, replicas)
		var wg sync.WaitGroup
		errs := make([]error, replicas)
		for i := range replicas {
			stores[i] = &certs.Store{}
			m := &certs.SelfManaged{
				Client: cp.Client, Namespace: "default", SecretName: "converge",
				DNSNames: []string{"svc.default.svc"}, CAValidity: 100 * time.Hour, CertValidity: 10 * time.Hour,
				RenewBefore: 1.0 / 3, WebhookConfigName: mwcFiles + "-absent", Store: stores[i], Log: slog.New(slog.DiscardHandler),
			}
			wg.Go(func() { errs[i] = m.Sync(ctx) })
		}
		wg.Wait()
		for i, err := range errs {
			// The configuration does not exist: that error is expected and must
			// not stop the replica from serving the shared certificate.
			if err == nil || !apierrors.IsNotFound(unwrapAll(err)) {
				t.Errorf("replica %d: err = %v, want a NotFound for the missing configuration", i, err)
			}
			if !stores[i].Ready() {
				t.Fatalf("replica %d has no certificate", i)
			}
		}
		sec, err := cp.Client.CoreV1().Secrets("default").Get(ctx, "converge", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range stores {
			if !bytes.Equal(s.Certificate().Certificate[0], pemBlock(t, sec.Data[certs.SecretCert])) {
				t.Errorf("replica %d serves a certificate that is not the Secret's", i)
			}
		}
	})

	t.Run("no serving before a certificate", func(t *testing.T) {
		bad := filepath.Join(cp.Dir, "unreachable.kubeconfig")
		harness.KubeconfigVia(t, cp.Kubeconfig, "127.0.0.1:1", bad)
		w := cp.StartWebhook(t, "webhook-pending", pendingIP, "--kubeconfig="+bad, "--namespace=kube-system", "--webhook-config-name=")
		hc := &http.Client{Timeout: time.Second}
		var status int
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			if exited, _ := w.Exited(); exited {
				return false, w.ExitError()
			}
			resp, err := hc.Get("http://" + net.JoinHostPort(pendingIP, "8080") + "/readyz")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			status = resp.StatusCode
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		if status != http.StatusServiceUnavailable {
			t.Errorf("/readyz = %d without a certificate, want 503", status)
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(pendingIP, "8443"), time.Second); err == nil {
			c.Close()
			t.Error("admission port accepts connections before there is a certificate")
		}
	})
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		if apierrors.IsNotFound(err) {
			return err
		}
		err = u.Unwrap()
	}
}

func mustCA(t *testing.T) certs.KeyPair {
	t.Helper()
	ca, err := certs.NewCA("e2e-ca", time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustServing(t *testing.T, ca certs.KeyPair) certs.KeyPair {
	t.Helper()
	p, err := certs.NewServing(ca, []string{"webhook-files.e2e"}, []net.IP{net.ParseIP(filesIP)}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func serialOf(t *testing.T, p certs.KeyPair) string {
	t.Helper()
	c, err := certs.ParseCert(p.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

func pool(pemCerts []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemCerts)
	return p
}

func pemBlock(t *testing.T, certPEM []byte) []byte {
	t.Helper()
	c, err := certs.ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c.Raw
}
