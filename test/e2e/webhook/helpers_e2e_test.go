//go:build e2e

package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	fin        = harness.Finalizer
	skipLabel  = "e2e.kube-node-ready/skip-admission" // nodes with it bypass every webhook
	filesLabel = "e2e.kube-node-ready/files-webhook"  // nodes with it go to the files-mode webhook
)

func getNode(t *testing.T, cp *harness.ControlPlane, name string) *corev1.Node {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
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
