//go:build e2e

package cleanup

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ipBadConfig   = "10.213.0.28"
	pxBadConfig   = "10.213.0.38:9001"
	noAdmissionLb = "e2e.kube-node-ready.io/no-admission"
)

// TestInvalidConfigAtStartHoldsDeletionsOnly: a webhook (re)started with a
// cleanup configuration it cannot build (its portworx tokenFile, a Secret
// key, is not mounted) stays up and ready: admission and back-fill add
// the finalizer as always, while a deleted node is held (Warning Event on
// the node and the Pod, metrics, /readyz detail). Once the configuration is
// fixed, the held node is cleaned up and goes, without a restart.
func TestInvalidConfigAtStartHoldsDeletionsOnly(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx := t.Context()
	px := newPortworx()
	harness.ServeHTTP(t, pxBadConfig, px)
	token := cp.Dir + "/px-token" // the Secret key is missing: not written yet
	config := writeFile(t, cp.Dir, "config.yaml", fmt.Sprintf(`plugins:
  portworx:
    critical: true
    endpoint: http://%s
    tokenFile: %s
`, pxBadConfig, token))
	kubeconfig := webhookIdentity(t, cp)
	// Nodes labelled noAdmissionLb can only get the finalizer by back-fill.
	noAdmission := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: noAdmissionLb, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		harness.WebhookConfig(mwc, "https://"+net.JoinHostPort(ipBadConfig, "8443")+"/mutate-node", noAdmission, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const pod = "webhook-bad-config"
	w := cp.StartWebhook(t, pod, ipBadConfig,
		"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name="+pod,
		"--webhook-config-name="+mwc, "--extra-sans="+ipBadConfig, "--config="+config, "--config-reload-interval=200ms",
		"--cleanup-retry-base=200ms", "--cleanup-retry-max=1s", "--log-level=debug")
	w.WaitReady(t, 30*time.Second)
	e := &env{cp: cp, dir: cp.Dir, px: px, procs: []*harness.Daemon{w}}
	e.leader(t)

	// Admission: a created node gets the finalizer (once the caBundle is in).
	var admitted string
	harness.WaitFor(t, 30*time.Second, "a created node gets the finalizer from admission", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "admitted-"}}, metav1.CreateOptions{})
		if err == nil && slices.Contains(n.Finalizers, fin) {
			admitted = n.Name
			return true
		}
		return false
	})
	// Back-fill: a node admission does not see gets it too.
	cp.KubectlT(t, harness.NodeYAML("backfilled", map[string]string{noAdmissionLb: "true"}), "create", "-f", "-")
	cp.WaitNode(t, "backfilled", 30*time.Second, "the finalizer from back-fill", func(n *corev1.Node) bool { return slices.Contains(n.Finalizers, fin) })

	// A deletion is held, and says why.
	px.set(admitted, pxOK)
	cp.KubectlT(t, "", "delete", "node", admitted, "--wait=false")
	e.waitEvent(t, admitted, api.EventCleanupHeld, "plugins.portworx")
	if n, err := cp.Client.CoreV1().Nodes().Get(ctx, admitted, metav1.GetOptions{}); err != nil || !slices.Contains(n.Finalizers, fin) {
		t.Fatalf("node %s after CleanupHeld: %v, want it held by %s", admitted, err, fin)
	}
	if v := w.Metric(t, "node_cleanup_nodes_total", `result="held"`); v != 1 {
		t.Errorf("node_cleanup_nodes_total{result=held} = %v, want 1", v)
	}
	if v := w.Metric(t, "node_cleanup_config_valid"); v != 0 {
		t.Errorf("node_cleanup_config_valid = %v, want 0", v)
	}
	resp, err := http.Get(w.URL("/readyz"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "degraded: cleanup configuration invalid") || !strings.Contains(string(body), "tokenFile") {
		t.Errorf("/readyz = %d %q, want 200 naming the invalid configuration", resp.StatusCode, body)
	}
	cp.WaitEvent(t, 10*time.Second, "Pod", pod, api.EventCleanupConfigInvalid, "node deletions are held")
	if calls := px.callsFor(admitted); len(calls) != 0 {
		t.Errorf("portworx called %d times without a valid configuration", len(calls))
	}

	// The Secret key appears: the same configuration now builds, and the
	// held node is cleaned up and goes, with no restart.
	if err := os.WriteFile(token, []byte("px-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, admitted, 30*time.Second)
	if calls := px.callsFor(admitted); len(calls) != 1 || calls[0].status != http.StatusOK {
		t.Errorf("portworx calls for %s = %+v, want one, answered 200", admitted, calls)
	}
	if v := w.Metric(t, "node_cleanup_config_valid"); v != 1 {
		t.Errorf("node_cleanup_config_valid = %v after the fix, want 1", v)
	}
	if exited, _ := w.Exited(); exited {
		t.Fatalf("webhook exited: %v", w.ExitError())
	}
}
