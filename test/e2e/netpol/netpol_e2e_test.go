//go:build e2e

package netpol_test

import (
	"context"
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
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	release   = "kube-node-ready"
	namespace = "kube-node-ready"
	finalizer = "infra.894.io/node-cleanup"
	// monitoring is the namespace the chart's policies let scrape metrics;
	// elsewhere is one they do not.
	monitoring = "monitoring"
	elsewhere  = "elsewhere"
)

// TestChartNetworkPoliciesEnforced: the chart with networkPolicy.enabled on
// real nodes where kube-network-policies enforces every NetworkPolicy. The
// agents' pod-to-pod check passes and the nodes verify; a pod in the
// namespace metricsNamespaceSelector names scrapes the agents' and the
// webhook's metrics, one in another namespace is refused; the API server's
// admission calls reach the webhook. Then policies cut as a chart bug would
// (the agents' peer port, the webhook's admission port) fail the peer check
// and leave a new Node without the finalizer, and restored they pass again:
// the enforcer enforces, so a policy that cuts a flow the chart needs fails
// this test.
func TestChartNetworkPoliciesEnforced(t *testing.T) {
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"install", testInstall},
		{"peer-check", func(t *testing.T) { peerCheckEverywhere(t, true) }},
		{"metrics-scrape", testMetricsScrape},
		{"admission", func(t *testing.T) { admitted(t, "netpol-admitted", true) }},
		{"cut-policies-fail", testCutPoliciesFail},
	}
	for _, s := range steps {
		start := time.Now()
		ok := t.Run(s.name, s.run)
		t.Logf("step %s: %s", s.name, time.Since(start).Round(time.Millisecond))
		if !ok {
			t.Fatalf("step %s failed; later steps build on it", s.name)
		}
	}
}

func testInstall(t *testing.T) {
	v, err := c.LocalImageValues("checkPeriod: 2s\nnetwork: {peerRefresh: 10s}", "")
	if err != nil {
		t.Fatal(err)
	}
	v += "networkPolicy:\n  enabled: true\n  metricsNamespaceSelector: {matchLabels: {kubernetes.io/metadata.name: " + monitoring + "}}\n"
	vals := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vals, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.HelmT(t, "install", release, chart, "--namespace", namespace, "--create-namespace", "--values", vals, "--wait", "--timeout", "3m")
	t.Logf("helm install --wait took %s", time.Since(start).Round(time.Millisecond))
	if _, err := c.Client.NetworkingV1().NetworkPolicies(namespace).Get(t.Context(), release, metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's agent NetworkPolicy: %v", err)
	}
	harness.Eventually(t, 2*time.Minute, "real nodes verified under enforced policies", verified)
	t.Logf("every real node verified %s after helm install started", time.Since(start).Round(time.Millisecond))
	// The agents' connections went through the enforcer: it accepted them.
	for _, n := range c.Nodes {
		if v, err := harness.ScrapeMetric(n.NetpolMetricsURL(), "kube_network_policies_packet_count", `verdict="accept"`); err != nil || v == 0 {
			t.Errorf("kube-network-policies on %s accepted %v packets (%v): it judges none", n.Name, v, err)
		}
	}
}

// verified reports whether every real node lost our taints and carries the label.
func verified() (bool, string) {
	var notYet []string
	for _, rn := range c.Nodes {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), rn.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == harness.StartupTaint.Key || t.Key == harness.UnhealthyTaint.Key
		})
		if tainted || n.Labels["node-ready/verified"] != "true" {
			notYet = append(notYet, fmt.Sprintf("%s (taints %v, label %q)", n.Name, n.Spec.Taints, n.Labels["node-ready/verified"]))
		}
	}
	return len(notYet) == 0, "not verified: " + strings.Join(notYet, ", ")
}

// pods maps node name to the Running pod of app on it.
func pods(t *testing.T, app string) map[string]corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			m[p.Spec.NodeName] = p
		}
	}
	return m
}

// peerCheckEverywhere runs the network check in every agent pod, every
// chosen peer required (with two nodes each agent chooses all of its
// candidates on the other node: the other agent and the CoreDNS pods
// there), and wants it to pass or to fail naming the other agent's pod IP.
func peerCheckEverywhere(t *testing.T, pass bool) {
	t.Helper()
	agents := pods(t, "kube-node-ready")
	if len(agents) != len(c.Nodes) {
		t.Fatalf("%d Running agent pods on %d real nodes", len(agents), len(c.Nodes))
	}
	for node, p := range agents {
		start := time.Now()
		out, err := c.Kubectl(t.Context(), nil, "exec", "-n", namespace, p.Name, "--", "/kube-node-ready-agent", "check",
			"--checks=network", "--check.network.peers=3", "--check.network.min-peers=3")
		took := time.Since(start).Round(time.Millisecond)
		switch {
		case pass && err != nil:
			t.Errorf("network check in the agent pod on %s failed under the chart's policies (%s): %v\n%s", node, took, err, out)
		case !pass && err == nil:
			t.Errorf("network check in the agent pod on %s passed with the agents' peer port cut (%s):\n%s", node, took, out)
		case !pass:
			for other, q := range agents {
				if other != node && !strings.Contains(out, q.Status.PodIP) {
					t.Errorf("network check on %s failed without naming the cut peer %s:\n%s", node, q.Status.PodIP, out)
				}
			}
		}
	}
}

// testMetricsScrape: a pod in the monitoring namespace GETs every agent's
// and webhook's /metrics (the agent's probe check, from the agent image);
// the same pod in another namespace gets none, nor does a GET from outside
// the pod network.
func testMetricsScrape(t *testing.T) {
	var targets []string
	for _, app := range []string{"kube-node-ready", "kube-node-ready-webhook"} {
		for _, p := range pods(t, app) {
			targets = append(targets, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(harness.MetricsPort))+"/metrics#timeout=2s")
		}
	}
	if len(targets) < len(c.Nodes)+1 {
		t.Fatalf("want the metrics of %d agents and a webhook, have %v", len(c.Nodes), targets)
	}
	// The selector matches pods only: a scraper outside the pod network (a
	// Prometheus on the host network; here the test, in the harness's
	// namespace) is refused as well.
	if _, err := harness.ScrapeMetric(strings.TrimSuffix(targets[0], "#timeout=2s"), "node_ready_verified"); err == nil {
		t.Errorf("a scrape of %s from outside the pod network passed: the policy is not enforced", targets[0])
	}
	for _, ns := range []string{monitoring, elsewhere} {
		phase, log := scrape(t, ns, targets)
		switch {
		case ns == monitoring && phase != corev1.PodSucceeded:
			t.Errorf("a scrape from namespace %s, which metricsNamespaceSelector allows, %s:\n%s", ns, phase, log)
		case ns == elsewhere && phase != corev1.PodFailed:
			t.Errorf("a scrape from namespace %s, which metricsNamespaceSelector does not allow, %s: the policy is not enforced\n%s", ns, phase, log)
		case ns == elsewhere && !strings.Contains(log, "/metrics"):
			t.Errorf("the refused scrape from %s names no target:\n%s", ns, log)
		}
	}
}

// scrape runs a pod in ns that GETs every target once and returns its
// final phase and log.
func scrape(t *testing.T, ns string, targets []string) (corev1.PodPhase, string) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	agent := pods(t, "kube-node-ready")
	var image string
	for _, p := range agent {
		image = p.Spec.Containers[0].Image
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "scrape", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "scrape", Image: image, ImagePullPolicy: corev1.PullNever,
				Args: []string{"check", "--node-name=scrape", "--checks=probe", "--check.probe.targets=" + strings.Join(targets, ",")},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	harness.Eventually(t, time.Minute, "the scrape pod in "+ns+" done", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, string(phase)
	})
	log, _ := c.Kubectl(ctx, nil, "logs", "-n", ns, pod.Name)
	return phase, log
}

// admitted creates a Node and reports whether the object the API server
// returned carries our finalizer: the admission call reached a webhook pod
// (the cleanup controller's back-fill comes later, in another write).
// The webhook's failurePolicy is Ignore: a call cut off only delays the
// create by the webhook's timeout.
func admitted(t *testing.T, name string, want bool) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	n, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start).Round(time.Millisecond)
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if got := slices.Contains(n.Finalizers, finalizer); got != want {
		t.Errorf("Node %s created in %s with finalizers %v: want the admission webhook's finalizer %v", name, took, n.Finalizers, want)
	} else {
		t.Logf("Node %s created in %s with finalizers %v", name, took, n.Finalizers)
	}
}

// testCutPoliciesFail: the chart's policies edited as a chart bug would
// leave them: the agents' policy without the other agents as a source (the
// peer port open to the monitoring namespace only), the webhook's without
// its admission port. The peer check fails naming the cut peer, a new Node
// is created without the finalizer, and the enforcer counts the drops;
// with the chart's policies back, both pass again.
func testCutPoliciesFail(t *testing.T) {
	ctx := t.Context()
	nps := c.Client.NetworkingV1().NetworkPolicies(namespace)
	agentPolicy, err := nps.Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	webhookPolicy, err := nps.Get(ctx, release+"-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	drops := func() float64 {
		var sum float64
		for _, n := range c.Nodes {
			v, err := harness.ScrapeMetric(n.NetpolMetricsURL(), "kube_network_policies_packet_count", `verdict="drop"`)
			if err != nil {
				t.Fatalf("kube-network-policies metrics on %s: %v", n.Name, err)
			}
			sum += v
		}
		return sum
	}
	dropsBefore := drops()

	cutAgent := agentPolicy.DeepCopy()
	cutAgent.Spec.Ingress[0].From = slices.DeleteFunc(cutAgent.Spec.Ingress[0].From, func(p networkingv1.NetworkPolicyPeer) bool {
		return p.PodSelector != nil
	})
	cutWebhook := webhookPolicy.DeepCopy()
	cutWebhook.Spec.Ingress = slices.DeleteFunc(cutWebhook.Spec.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool {
		return len(r.From) == 0
	})
	if len(cutAgent.Spec.Ingress[0].From) != 1 || len(cutWebhook.Spec.Ingress) != 1 {
		t.Fatalf("the chart's policies changed shape; agent from %v, webhook ingress %v", agentPolicy.Spec.Ingress, webhookPolicy.Spec.Ingress)
	}
	restore := func() {
		for _, p := range []*networkingv1.NetworkPolicy{agentPolicy, webhookPolicy} {
			cur, err := nps.Get(context.Background(), p.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("restore %s: %v", p.Name, err)
				continue
			}
			cur.Spec = p.Spec
			if _, err := nps.Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
				t.Errorf("restore %s: %v", p.Name, err)
			}
		}
	}
	t.Cleanup(restore)
	for _, p := range []*networkingv1.NetworkPolicy{cutAgent, cutWebhook} {
		if _, err := nps.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The enforcer sees the change through its watch; established
	// connections keep flowing, new ones are judged by the new policies.
	// The API server keeps its connections to the webhook pods open: new
	// pods make it open new ones, which the cut policy refuses (their
	// readiness probes come from the kubelet, which the enforcer lets pass).
	c.KubectlT(t, "", "rollout", "restart", "-n", namespace, "deployment/"+release+"-webhook")
	if out, err := c.Kubectl(ctx, nil, "rollout", "status", "-n", namespace, "deployment/"+release+"-webhook", "--timeout=2m"); err != nil {
		t.Fatalf("webhook rollout under the cut policies: %v\n%s", err, out)
	}
	harness.Eventually(t, 30*time.Second, "the enforcers dropping packets", func() (bool, string) {
		d := drops()
		return d > dropsBefore, fmt.Sprintf("%v drops, %v before the cut", d, dropsBefore)
	})
	peerCheckEverywhere(t, false)
	admitted(t, "netpol-cut-admission", false)

	restore()
	harness.Eventually(t, time.Minute, "the peer check passing with the chart's policies back", func() (bool, string) {
		for node, p := range pods(t, "kube-node-ready") {
			out, err := c.Kubectl(ctx, nil, "exec", "-n", namespace, p.Name, "--", "/kube-node-ready-agent", "check",
				"--checks=network", "--check.network.peers=3", "--check.network.min-peers=3")
			if err != nil {
				return false, fmt.Sprintf("%s: %v %s", node, err, out)
			}
		}
		return true, ""
	})
	admitted(t, "netpol-restored-admission", true)
	harness.Eventually(t, time.Minute, "real nodes verified with the chart's policies back", verified)
}
