//go:build e2e

// Package webhook tests kube-node-ready-webhook, the real binary, against a
// real kube-apiserver that calls it, using real kubectl.
package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	fin        = harness.Finalizer
	skipLabel  = "e2e.kube-node-ready/skip-admission" // nodes with it bypass every webhook
	filesLabel = "e2e.kube-node-ready/files-webhook"  // nodes with it go to the files-mode webhook
)

// waitFinalizer waits until the node carries the finalizer or timeout passes.
func waitFinalizer(t *testing.T, cp *harness.ControlPlane, name string, timeout time.Duration) *corev1.Node {
	t.Helper()
	return cp.WaitNode(t, name, timeout, "finalizer "+fin, func(n *corev1.Node) bool { return slices.Contains(n.Finalizers, fin) })
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
