//go:build e2e

package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
	"github.com/kube-node-ready/kube-node-ready/test/webhookenv"
)

const (
	fin        = "infra.894.io/node-cleanup"
	skipLabel  = "e2e.kube-node-ready/skip-admission" // nodes with it bypass every webhook
	filesLabel = "e2e.kube-node-ready/files-webhook"  // nodes with it go to the files-mode webhook
)

// The webhook process helpers live in test/webhookenv, shared with the
// cleanup tests and benchmarks.
type webhookProc = webhookenv.Proc

func startWebhook(t *testing.T, dir, name, ip string, args ...string) *webhookProc {
	t.Helper()
	return webhookenv.Start(t, dir, name, ip, args...)
}

var (
	webhookConfig = webhookenv.WebhookConfig
	nodeYAML      = webhookenv.NodeYAML
)

func kubectl(t *testing.T, cp *harness.ControlPlane, stdin string, args ...string) string {
	t.Helper()
	return webhookenv.Kubectl(t, cp, stdin, args...)
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
