//go:build e2e

package kubectlplugin_test

import (
	"context"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// customAgent is an agent DaemonSet as a user configured it: its own
// startup taint and a previous key. Its nodeSelector matches no node, so it
// never runs a pod: status only reads its flags.
const customAgent = `apiVersion: v1
kind: Namespace
metadata: {name: kp-keys}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-node-ready, namespace: kp-keys}
spec:
  selector: {matchLabels: {app: kube-node-ready}}
  template:
    metadata: {labels: {app: kube-node-ready}}
    spec:
      nodeSelector: {kp-keys/never: "true"}
      containers:
        - name: agent
          image: ghcr.io/kube-node-ready/kube-node-ready-agent:dev
          args: [--startup-taint=example.com/booting=true:NoSchedule, --previous-taint-keys=example.com/old-boot]
`

// TestStatusNamesEveryKey: nodes registered with the Cluster Autoscaler
// preset's key (the default, harness.StartupTaint), the Karpenter preset's
// and the seed key are unverified to status; one carrying the custom
// startup key or previous key of the agent DaemonSet deployed is too, as
// long as that DaemonSet says so.
func TestStatusNamesEveryKey(t *testing.T) {
	taint := func(key string) harness.NodeOptions {
		return harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	}
	cp.NewNode(t, "kp-key-ca", harness.NodeOptions{})
	cp.NewNode(t, "kp-key-karpenter", taint(api.KarpenterStartupTaintKey))
	cp.NewNode(t, "kp-key-seed", harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{harness.SeedStartupTaint}})
	cp.NewNode(t, "kp-key-custom", taint("example.com/booting"))
	cp.NewNode(t, "kp-key-previous", taint("example.com/old-boot"))

	taints := func(t *testing.T) map[string]string {
		t.Helper()
		got := map[string]string{}
		for _, row := range table(t, plugin(t, "status").stdout) {
			got[row["NAME"]] = row["TAINT"]
		}
		return got
	}
	check := func(t *testing.T, custom string) {
		t.Helper()
		got := taints(t)
		for name, want := range map[string]string{"kp-key-ca": "unverified", "kp-key-karpenter": "unverified", "kp-key-seed": "unverified",
			"kp-key-custom": custom, "kp-key-previous": custom} {
			if got[name] != want {
				t.Errorf("%s: TAINT %q, want %q", name, got[name], want)
			}
		}
	}

	t.Run("no agent DaemonSet: the presets' keys", func(t *testing.T) { check(t, "none") })

	cp.KubectlOK(t, customAgent, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = cp.Kubectl(context.Background(), nil, "delete", "namespace", "kp-keys", "--wait=false", "--ignore-not-found")
	})
	t.Run("the DaemonSet's own keys too", func(t *testing.T) {
		check(t, "unverified")
		out := plugin(t, "why", "kp-key-custom").stdout
		if !regexp.MustCompile(`(?m)^Taint:\s+unverified\s+\(example\.com/booting\)$`).MatchString(out) {
			t.Errorf("why kp-key-custom:\n%s", out)
		}
	})
}
