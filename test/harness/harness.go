// Package harness runs a real Kubernetes control plane (etcd, kube-apiserver and
// CoreDNS) as local processes for tests and for `make demo`, optionally with
// real nodes (StartCluster), and runs the project's two binaries against it
// the same way (StartAgent, StartWebhook), with the credentials and RBAC the
// chart gives them.
//
// Everything runs inside a private network namespace (see EnterNetworkNamespace)
// where ClusterNet is local: the API server listens on APIServerIP:443 and on the
// kubernetes Service ClusterIP, CoreDNS on the kube-dns pod and Service IPs, and
// every simulated node gets an address of its own for the process that plays it.
package harness

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options tunes a control plane.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kubectl and coredns. Empty means
	// $KNR_BIN_DIR, else bin/ at the repository root.
	BinDir string
	// Dir is the working directory for data, certificates and logs. Empty
	// means a new temporary directory, removed by Stop.
	Dir string
	// NoDNS leaves CoreDNS out.
	NoDNS bool
	// AuditLog makes the API server write every request (metadata level, JSON)
	// to Dir/audit.log, for tests and benchmarks that count requests.
	AuditLog bool
	// WebhookClientCert, when set, is the client certificate the API server
	// presents to every admission webhook it calls, for webhooks that require
	// one: it is written to Dir/apiserver with a kubeconfig and the
	// AdmissionConfiguration passed as --admission-control-config-file.
	WebhookClientCert *ClientCert
	// Logf receives progress messages; nil discards them.
	Logf func(format string, args ...any)
	// IPFamilies are the cluster's IP families, primary first: nil (or
	// IPv4 alone) is the IPv4 single-stack cluster the harness always ran;
	// {IPv6} is IPv6 single-stack; {IPv4, IPv6} or {IPv6, IPv4} dual-stack.
	// They choose the Service CIDRs (the kubernetes Service takes the
	// primary family), the API server's address, the kube-dns Service's
	// ClusterIPs and CoreDNS's addresses, and with real nodes the nodes'
	// addresses, pod CIDRs and kube-proxy's mode (see Addresses).
	IPFamilies []corev1.IPFamily

	// cluster is set by StartCluster: the API server then also serves
	// kubelets (client certificates, Node authorizer, NodeRestriction) and
	// CoreDNS runs as a Deployment on the real nodes instead of a process.
	cluster *clusterPKI
}

// ClientCert is a PEM certificate and its PEM private key.
type ClientCert struct {
	// CertPEM is the certificate, optionally followed by intermediates.
	CertPEM []byte
	// KeyPEM is its private key.
	KeyPEM []byte
}

// ControlPlane is a running etcd + kube-apiserver (+ CoreDNS).
type ControlPlane struct {
	// Dir holds data, certificates, kubeconfigs and component logs.
	Dir string
	// BinDir is where the component binaries were found.
	BinDir string
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// CAFile is the CA bundle that verifies the API server's serving certificate.
	CAFile string
	// ResolvConf is a resolv.conf that points at the kube-dns Service, as a node's would.
	ResolvConf string
	// DNSAddr is CoreDNS's pod address (host:port).
	DNSAddr string
	// Families are the addresses of Options.IPFamilies, primary first.
	Families []Addresses

	logf      func(string, ...any)
	ownDir    bool
	etcdURL   string
	mu        sync.Mutex
	etcd      *Process
	apiserver *Process
	// apiArgs are the API server's flags, kept for RestartAPIServer.
	apiArgs  []string
	coredns  *Process
	nextNode int
	// extra are the processes started after the plane (controllers, real
	// nodes' components), stopped first, newest first.
	extra []*Process
	// onStop run after every process has stopped, newest first.
	onStop []func()
}

const (
	adminToken = "harness-admin-token"
	apiPort    = 443
)

// Start brings up etcd and kube-apiserver, waits for /readyz, and (unless
// opts.NoDNS) starts CoreDNS with the kube-dns Service and EndpointSlice a real
// cluster has. It must run inside the harness network namespace.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if os.Getenv(envInNetns) != "1" {
		return nil, errors.New("harness must run inside its network namespace: call harness.Main from TestMain or harness.EnterNetworkNamespace first")
	}
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	families, err := familyAddresses(opts.IPFamilies)
	if err != nil {
		return nil, err
	}
	if hasIPv6(families) {
		if err := setupIPv6(); err != nil {
			return nil, err
		}
	}
	cp := &ControlPlane{BinDir: binDir, Dir: opts.Dir, logf: opts.Logf, Families: families}
	if cp.logf == nil {
		cp.logf = func(string, ...any) {}
	}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "knr-harness-"); err != nil {
			return nil, err
		}
		cp.ownDir = true
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, cp.Logs(30))
			cp.Stop()
		}
	}()
	start := time.Now()
	if err = cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err = cp.startAPIServer(ctx, opts); err != nil {
		return nil, err
	}
	if !opts.NoDNS && opts.cluster == nil {
		if err = cp.StartDNS(ctx); err != nil {
			return nil, err
		}
	}
	cp.logf("control plane up in %s (dir %s)", time.Since(start).Round(time.Millisecond), cp.Dir)
	return cp, nil
}

// StartT is Start for a test: it fails the test if the plane does not come up,
// and stops it when the test ends, printing component logs if the test failed.
func StartT(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), planeStartTimeout)
	defer cancel()
	cp, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs:\n%s", cp.Logs(40))
		}
		cp.Stop()
	})
	return cp
}

func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("KNR_BIN_DIR")
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	return filepath.Abs(dir)
}

// RepoRoot finds the repository root by walking up from the working directory
// to the directory holding the top-level Makefile and go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		_, errMod := os.Stat(filepath.Join(dir, "go.mod"))
		_, errMake := os.Stat(filepath.Join(dir, "Makefile"))
		if errMod == nil && errMake == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod + Makefile) not found above the working directory; set KNR_BIN_DIR")
		}
		dir = parent
	}
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	lo := cp.loopback()
	clientPort, err := freePort(lo)
	if err != nil {
		return err
	}
	peerPort, err := freePort(lo)
	if err != nil {
		return err
	}
	client := "http://" + hostPort(lo, clientPort)
	peer := "http://" + hostPort(lo, peerPort)
	args := []string{
		"--name=harness",
		"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=harness=" + peer,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	p, err := StartProcess(cp.Dir, "etcd", filepath.Join(cp.BinDir, "etcd"), args, nil)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.etcd = p
	cp.mu.Unlock()
	hc := &http.Client{Timeout: time.Second}
	err = waitFor(ctx, p, startBudget, func() (bool, error) {
		resp, err := hc.Get(client + "/health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("etcd not healthy: %w", err)
	}
	cp.etcdURL = client
	return nil
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, opts Options) error {
	certDir := filepath.Join(cp.Dir, "apiserver")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	saKey, saPub, err := writeServiceAccountKeys(certDir)
	if err != nil {
		return err
	}
	tokens := filepath.Join(certDir, "tokens.csv")
	tokenLines := adminToken + `,admin,admin,"system:masters"` + "\n"
	if opts.cluster != nil {
		tokenLines += opts.cluster.tokenLines()
	}
	if err := os.WriteFile(tokens, []byte(tokenLines), 0o600); err != nil {
		return err
	}
	bind := "0.0.0.0"
	if hasIPv6(cp.Families) {
		bind = "::" // both families
	}
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--cert-dir=" + certDir,
		"--bind-address=" + bind,
		"--advertise-address=" + cp.Primary().APIServerIP,
		"--secure-port=" + strconv.Itoa(apiPort),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--token-auth-file=" + tokens,
		"--service-cluster-ip-range=" + joinField(cp.Families, func(a Addresses) string { return a.ServiceCIDR }),
		"--allow-privileged=true",
		"--endpoint-reconciler-type=lease",
		"--v=1",
	}
	if opts.cluster == nil {
		args = append(args, "--authorization-mode=RBAC",
			// No node lifecycle controller runs here to lift the not-ready taint
			// this plugin adds, so simulated nodes carry only the taints we give them.
			"--disable-admission-plugins=TaintNodesByCondition")
	} else {
		clusterArgs, err := opts.cluster.apiServerArgs(certDir)
		if err != nil {
			return err
		}
		args = append(args, clusterArgs...)
	}
	if opts.AuditLog {
		policy := filepath.Join(certDir, "audit-policy.yaml")
		const metadataForAll = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
		if err := os.WriteFile(policy, []byte(metadataForAll), 0o644); err != nil {
			return err
		}
		// Never rotated (0 would mean the log library's 100 MB): readers
		// keep an offset into the one file, and a fleet of 1 000 nodes
		// writes 100 MB in minutes.
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+cp.AuditLogPath(), "--audit-log-format=json", "--audit-log-maxsize=1000000")
	}
	if opts.WebhookClientCert != nil {
		admissionConfig, err := writeWebhookClientCert(certDir, *opts.WebhookClientCert)
		if err != nil {
			return err
		}
		args = append(args, "--admission-control-config-file="+admissionConfig)
	}
	cp.apiArgs = args
	return cp.runAPIServer(ctx)
}

// RestartAPIServer stops kube-apiserver, keeps it down for down, and starts
// it again on the same etcd, certificates and flags, as a control-plane
// upgrade or crash does; it returns once /readyz answers 200.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	cp.mu.Lock()
	p := cp.apiserver
	cp.mu.Unlock()
	if err := p.Stop(10 * time.Second); err != nil {
		cp.logf("kube-apiserver stop: %v", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	return cp.runAPIServer(ctx)
}

// runAPIServer starts kube-apiserver with cp.apiArgs and waits until it
// serves.
func (cp *ControlPlane) runAPIServer(ctx context.Context) error {
	certDir := filepath.Join(cp.Dir, "apiserver")
	p, err := StartProcess(cp.Dir, "kube-apiserver", filepath.Join(cp.BinDir, "kube-apiserver"), cp.apiArgs, nil)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.apiserver = p
	cp.mu.Unlock()

	// The API server writes its self-signed serving certificate followed by
	// the CA that signed it; the bundle is what clients verify against.
	servingCert := filepath.Join(certDir, "apiserver.crt")
	// The file is written in place, not renamed: wait until it holds the
	// whole bundle, or a client built from a half-written file trusts nothing.
	err = waitFor(ctx, p, startBudget, func() (bool, error) {
		b, err := os.ReadFile(servingCert)
		return err == nil && completeBundle(b), nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver wrote no serving certificate: %w", err)
	}
	cp.CAFile = servingCert
	host := "https://" + hostPort(cp.Primary().APIServerIP, apiPort)
	cp.Config = &rest.Config{
		Host:            host,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile},
		QPS:             200,
		Burst:           400,
	}
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return err
	}
	if cp.Kubeconfig, err = cp.WriteKubeconfig("admin", "admin", adminToken); err != nil {
		return err
	}

	rt, err := rest.TransportFor(cp.Config)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: rt, Timeout: 2 * time.Second}
	last := "no answer"
	err = waitFor(ctx, p, startBudget, func() (bool, error) {
		resp, err := hc.Get(host + "/readyz?verbose")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		resp.Body.Close()
		last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w; last /readyz: %s", err, last)
	}
	// The bootstrap controller creates default/kubernetes shortly after readyz.
	err = waitFor(ctx, p, startBudget, func() (bool, error) {
		_, err := cp.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("default/kubernetes Service never appeared: %w", err)
	}
	return nil
}

// AuditLogPath is where the API server writes its audit log when Options.AuditLog is set.
func (cp *ControlPlane) AuditLogPath() string { return filepath.Join(cp.Dir, "audit.log") }

// WriteKubeconfig writes a kubeconfig for the API server that authenticates
// with token, as dir/<name>.kubeconfig, and returns its path.
func (cp *ControlPlane) WriteKubeconfig(name, user, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["harness"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthority: cp.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["harness"] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: user}
	cfg.CurrentContext = "harness"
	path := filepath.Join(cp.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

// writeWebhookClientCert writes the pair and the AdmissionConfiguration that
// makes the API server present it to webhooks, and returns the configuration's
// path. The API server picks a webhook's credentials from the kubeconfig's
// users by the webhook's host:port; "*" is the fallback for every host.
func writeWebhookClientCert(dir string, cc ClientCert) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	certFile := filepath.Join(dir, "webhook-client.crt")
	keyFile := filepath.Join(dir, "webhook-client.key")
	if err := os.WriteFile(certFile, cc.CertPEM, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(keyFile, cc.KeyPEM, 0o600); err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return "", fmt.Errorf("write webhook client kubeconfig: %w", err)
	}
	// Both kinds are apiserver.config.k8s.io/v1 (k8s.io/apiserver/pkg/apis/apiserver/v1
	// and .../admission/plugin/webhook/config/apis/webhookadmission/v1); the
	// kubeconfig path must be absolute.
	config := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
`, kubeconfig)
	path := filepath.Join(dir, "admission-config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// completeBundle reports whether b holds the serving certificate and the CA
// that signed it, both parseable.
func completeBundle(b []byte) bool {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return n >= 2
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return false
		}
		n++
	}
}

func writeServiceAccountKeys(dir string) (keyPath, pubPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyPath = filepath.Join(dir, "sa.key")
	pubPath = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, nil
}

// waitFor polls cond every 50 ms until it holds, the timeout passes, ctx ends,
// or p exits (which is reported with p's last log lines).
func waitFor(ctx context.Context, p *Process, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		if exited, _ := p.Exited(); exited {
			return false, errExited
		}
		return cond()
	})
	if errors.Is(err, errExited) {
		return p.ExitError()
	}
	return err
}

// startBudget is how long a started process may take to answer (waitFor).
// One that fails exits and ends the wait at once, so the budget only bounds
// a start that hangs. At load 25 on two 2.1-GHz EPYC cores, from empty
// caches, kube-apiserver's post-start hooks (the RBAC bootstrap roles,
// priority and fairness) took more than the 30 s it had, and seven e2e
// packages failed in their setup.
const startBudget = 2 * time.Minute

// Logs returns the last n lines of every component's log.
func (cp *ControlPlane) Logs(n int) string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out string
	for _, p := range append([]*Process{cp.etcd, cp.apiserver, cp.coredns}, cp.extra...) {
		if p != nil {
			out += fmt.Sprintf("--- %s (%s)\n%s", p.Name, p.LogPath, p.Tail(n))
		}
	}
	return out
}

// apiserverStopGrace is how long Stop lets kube-apiserver end by itself
// before killing it: its shutdown hooks take milliseconds.
const apiserverStopGrace = 2 * time.Second

// Stop stops every component (process groups and all) and removes the
// working directory if Start created it.
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	var procs []*Process
	for i := len(cp.extra) - 1; i >= 0; i-- {
		procs = append(procs, cp.extra[i])
	}
	procs = append(procs, cp.coredns, cp.apiserver, cp.etcd)
	onStop := cp.onStop
	cp.onStop = nil
	cp.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		grace := 10 * time.Second
		if p == cp.apiserver {
			// kube-apiserver's graceful stop waits, up to its
			// --request-timeout (60 s), for the watches still open on it
			// to end, a live client's too (RestartAPIServer's 10 s run
			// out with agents connected). At teardown nothing needs them
			// to drain.
			grace = apiserverStopGrace
		}
		if err := p.Stop(grace); err != nil && (p != cp.apiserver || !errors.Is(err, errKilled)) {
			cp.logf("stop: %v", err)
		}
	}
	for i := len(onStop) - 1; i >= 0; i-- {
		onStop[i]()
	}
	if cp.ownDir && os.Getenv("KNR_KEEP_HARNESS_DIR") == "" {
		os.RemoveAll(cp.Dir)
	}
}
