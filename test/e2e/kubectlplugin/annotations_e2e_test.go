//go:build e2e

package kubectlplugin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// renamedBypass is an agent DaemonSet and a webhook Deployment whose chart
// renamed both bypass annotations. Their nodeSelectors match no node and
// the Deployment has no replicas: the plugin reads only their flags.
const renamedBypass = `apiVersion: v1
kind: Namespace
metadata: {name: kp-renamed}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-node-ready, namespace: kp-renamed}
spec:
  selector: {matchLabels: {app: kube-node-ready}}
  template:
    metadata: {labels: {app: kube-node-ready}}
    spec:
      nodeSelector: {kp-renamed/never: "true"}
      containers:
        - name: agent
          image: ghcr.io/kube-node-ready/kube-node-ready-agent:dev
          args: [--skip-verification-annotation=example.com/let-through]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kube-node-ready-webhook, namespace: kp-renamed}
spec:
  replicas: 0
  selector: {matchLabels: {app: kube-node-ready-webhook}}
  template:
    metadata: {labels: {app: kube-node-ready-webhook}}
    spec:
      nodeSelector: {kp-renamed/never: "true"}
      containers:
        - name: webhook
          image: ghcr.io/kube-node-ready/kube-node-ready-webhook:dev
          env: [{name: KNR_WEBHOOK_SKIP_CLEANUP_ANNOTATION, value: example.com/no-cleanup}]
`

// TestBypassUsesTheDeployedNames: with the release's bypass annotations
// renamed, bypass sets the name the deployed agent reads, and the real agent
// started with it untaints the node; unbypass removes it; cleanup skip sets
// the name the deployed webhook reads. With no release in the namespace
// given, the defaults, and a note says so.
func TestBypassUsesTheDeployedNames(t *testing.T) {
	cp.KubectlOK(t, renamedBypass, "apply", "-f", "-")
	t.Cleanup(func() {
		ctx := context.Background()
		// No namespace controller runs here: delete what it would.
		_, _ = cp.Kubectl(ctx, nil, "delete", "daemonset,deployment", "--all", "-n", "kp-renamed", "--ignore-not-found")
		_, _ = cp.Kubectl(ctx, nil, "delete", "namespace", "kp-renamed", "--wait=false", "--ignore-not-found")
	})
	n := cp.NewNode(t, "kp-renamed", startingNode(nil))
	cp.StartAgent(t, n, append(agentArgs, "--checks=dns,api", "--check.dns.names=does-not-exist.default.svc.cluster.local",
		"--skip-verification-annotation=example.com/let-through")...)
	cp.WaitNode(t, n.Name, 15*time.Second, "dns failing in the condition", func(n *corev1.Node) bool {
		c := condition(n)
		return c != nil && c.Reason == api.ReasonChecksFailing
	})

	r := plugin(t, "bypass", n.Name, "-n", "kp-renamed")
	if !strings.HasPrefix(r.stdout, "node/kp-renamed bypassed: example.com/let-through=true") || r.stderr != "" {
		t.Errorf("bypass: %s", r)
	}
	if a := cp.GetNode(t, n.Name).Annotations; a["example.com/let-through"] != "true" || a[api.SkipVerificationAnnotation] != "" {
		t.Errorf("annotations after bypass: %v; want example.com/let-through=true alone", a)
	}
	cp.WaitNode(t, n.Name, 15*time.Second, "untainted by the agent, which reads example.com/let-through", func(n *corev1.Node) bool {
		c := condition(n)
		return !hasTaint(n, harness.StartupTaint.Key) && c != nil && c.Reason == api.ReasonBypassed
	})
	if r = plugin(t, "unbypass", n.Name, "-n", "kp-renamed"); !strings.HasPrefix(r.stdout, "node/kp-renamed unbypassed: example.com/let-through removed") {
		t.Errorf("unbypass: %s", r)
	}
	if a := cp.GetNode(t, n.Name).Annotations; a["example.com/let-through"] != "" {
		t.Errorf("annotations after unbypass: %v", a)
	}

	if r = plugin(t, "cleanup", "skip", n.Name, "--yes", "-n", "kp-renamed"); !strings.HasPrefix(r.stdout, "node/kp-renamed annotated example.com/no-cleanup=true") {
		t.Errorf("cleanup skip: %s", r)
	}
	if a := cp.GetNode(t, n.Name).Annotations; a["example.com/no-cleanup"] != "true" || a[api.SkipCleanupAnnotation] != "" {
		t.Errorf("annotations after cleanup skip: %v; want example.com/no-cleanup=true alone", a)
	}

	// A namespace without a release: the defaults, with a note.
	if _, err := cp.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kp-empty"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), "kp-empty", metav1.DeleteOptions{})
	})
	r = plugin(t, "bypass", n.Name, "-n", "kp-empty")
	if !strings.HasPrefix(r.stdout, "node/kp-renamed bypassed: node-ready/skip-verification=true") ||
		!strings.Contains(r.stderr, "note: no kube-node-ready agent DaemonSet found in namespace kp-empty: using the default skip-verification annotation node-ready/skip-verification") {
		t.Errorf("bypass without a release: %s", r)
	}
}
