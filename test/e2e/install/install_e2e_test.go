//go:build e2e

package install_test

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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	release       = "kube-node-ready"
	namespace     = "kube-node-ready"
	finalizer     = "infra.894.io/node-cleanup"
	verifiedLabel = "node-ready/verified"
	skipAnnot     = "node-ready/skip-verification"
)

// unhealthyKey is the chart's default re-taint: the default preset's.
var unhealthyKey = harness.UnhealthyTaint.Key

var (
	c     *harness.Cluster
	chart string
)

// values are the chart values of every install here: the locally built
// images and, so that re-taints and recoveries happen within a test, a short
// period.
func values(t *testing.T) string {
	t.Helper()
	v, err := c.LocalImageValues("checkPeriod: 2s\nnetwork: {peerRefresh: 10s}\ngates: {daemonSets: {timeout: "+gateTimeout.String()+"}}", "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == harness.StartupTaint.Key || t.Key == unhealthyKey
	})
}

func realNodeNames() []string {
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// verified reports whether every named node is untainted and labelled
// verified, and which are not.
func verified(t *testing.T, names ...string) (bool, string) {
	var notYet []string
	for _, name := range names {
		n, err := c.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if tainted(n) || n.Labels[verifiedLabel] != "true" {
			notYet = append(notYet, fmt.Sprintf("%s (taints %v, label %q, condition: %s)", name, n.Spec.Taints, n.Labels[verifiedLabel], why(n)))
		}
	}
	return len(notYet) == 0, "not verified: " + strings.Join(notYet, ", ")
}

// why is the agent's KubeNodeReady condition on n, as kubectl describe shows it.
func why(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == "KubeNodeReady" {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "none"
}

// liveNodeNames are the real nodes that still exist.
func liveNodeNames(t *testing.T) []string {
	var names []string
	for _, n := range c.Nodes {
		if _, err := c.Client.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{}); err == nil {
			names = append(names, n.Name)
		}
	}
	return names
}

// agentPods maps node name to the Running agent pod on it.
func agentPods(t *testing.T) map[string]corev1.Pod {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app=kube-node-ready"})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			m[p.Spec.NodeName] = p
		}
	}
	return m
}

// agentRounds waits until the loop of every running agent pod has run n
// more times (node_ready_loop_iterations_total), hold holding all along:
// what "nothing happened" on the nodes is anchored on.
func agentRounds(t *testing.T, n int, what string, hold func() (bool, string)) {
	t.Helper()
	var urls []string
	for _, p := range agentPods(t) {
		urls = append(urls, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(harness.MetricsPort))+"/metrics")
	}
	harness.WaitCountersAt(t, urls, harness.Counter{Name: "node_ready_loop_iterations_total"}, n, what, hold)
}

// metric reads one metric (summed over the series matching match) from a
// pod's :8080/metrics at its pod IP.
func metric(podIP, name string, match ...string) (float64, error) {
	return harness.ScrapeMetric("http://"+net.JoinHostPort(podIP, strconv.Itoa(harness.MetricsPort))+"/metrics", name, match...)
}

func TestChartOnRealNodes(t *testing.T) {
	vals := values(t)
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"install", func(t *testing.T) { testInstall(t, vals) }},
		{"join", testJoin},
		{"pod-to-pod", testPodToPod},
		{"dns-outage-and-bypass", testDNSOutageAndBypass},
		{"own-node-policy", testOwnNodePolicy},
		{"upgrade", func(t *testing.T) { testUpgrade(t, vals) }},
		{"daemonset-gate", testDaemonSetGate},
		{"delete-node", testDeleteNode},
		{"replace-never-verifying", testReplaceNeverVerifying},
		{"csi-drivers-gate", testCSIDriversGate},
		{"uninstall", testUninstall},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.Fatalf("step %s failed; later steps build on it", s.name)
		}
	}
}

// testInstall: helm install with default values (images local); every real
// node's agent pod runs, the nodes are verified, the logs are JSON lines
// naming the node, and every agent serves /metrics at its pod IP.
func testInstall(t *testing.T, vals string) {
	start := time.Now()
	c.HelmT(t, "install", release, chart, "--namespace", namespace, "--create-namespace", "--values", vals, "--wait", "--timeout", "3m")
	t.Logf("helm install --wait took %s", time.Since(start).Round(time.Millisecond))
	harness.Eventually(t, 2*time.Minute, "real nodes verified", func() (bool, string) { return verified(t, realNodeNames()...) })
	t.Logf("every real node verified %s after helm install started", time.Since(start).Round(time.Millisecond))

	pods := agentPods(t)
	for _, n := range c.Nodes {
		p, ok := pods[n.Name]
		if !ok {
			t.Fatalf("no Running agent pod on %s", n.Name)
		}
		v, err := metric(p.Status.PodIP, "node_ready_verified")
		if err != nil || v != 1 {
			t.Errorf("agent on %s: node_ready_verified = %v, %v", n.Name, v, err)
		}
	}
	logs := c.KubectlOK(t, "", "logs", "-n", namespace, "-l", "app=kube-node-ready", "--tail=-1", "--prefix=false")
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	for _, n := range c.Nodes {
		if !strings.Contains(logs, `"node":"`+n.Name+`"`) {
			t.Errorf("kubectl logs -l app=kube-node-ready: no line names node %s", n.Name)
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "{") || !strings.HasSuffix(l, "}") {
			t.Errorf("log line is not JSON: %q", l)
			break
		}
	}
}

// testJoin: a real node joining after the install is verified, and the
// webhook's admission (not the back-fill) gave it the finalizer at creation.
func testJoin(t *testing.T) {
	ctx := t.Context()
	w, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// No --register-with-taints: the install path is the chart's admission
	// adding the startup taint (webhook.startupTaint.inject, on by default).
	// The cluster's first nodes registered with the kubelet flag.
	n, err := c.AddNode(ctx, harness.RealNodeOptions{NoWait: true, Taints: []corev1.Taint{}})
	if err != nil {
		t.Fatal(err)
	}
	var created, untainted time.Time
	deadline := time.After(2 * time.Minute)
	for untainted.IsZero() {
		select {
		case ev := <-w.ResultChan():
			node, ok := ev.Object.(*corev1.Node)
			if !ok || node.Name != n.Name {
				continue
			}
			if created.IsZero() {
				created = node.CreationTimestamp.Time
				if !slices.Contains(node.Finalizers, finalizer) {
					t.Errorf("node %s first seen without the finalizer %s (finalizers %v): admission did not add it", n.Name, finalizer, node.Finalizers)
				}
				var ours []string
				for _, tn := range node.Spec.Taints {
					if harness.OurTaint(tn.Key) {
						ours = append(ours, tn.Key)
					}
				}
				if !slices.Equal(ours, []string{harness.StartupTaint.Key}) || node.Annotations[api.StartupTaintAdmissionAnnotation] != "added" {
					t.Errorf("node %s first seen with our taints %v and mark %q, want exactly [%s] added at creation by admission",
						n.Name, ours, node.Annotations[api.StartupTaintAdmissionAnnotation], harness.StartupTaint.Key)
				}
			}
			if !tainted(node) && node.Labels[verifiedLabel] == "true" {
				untainted = time.Now()
			}
		case <-deadline:
			t.Fatalf("node %s joined but was not verified within 2m", n.Name)
		}
	}
	t.Logf("node %s, registered with no taint flag: creation -> taint removed in %s (creationTimestamp has 1 s resolution)", n.Name, untainted.Sub(created).Round(time.Millisecond))
	doctorFindsNothing(t)
}

// testPodToPod: the network check, run by `kubectl exec` in each real agent
// pod (`kube-node-ready-agent check`, the command a person runs on a node
// that looks wrong), reaches the agents on the other real nodes through the
// pod network; with one node's pod network cut off, it fails on every node
// whose chosen peers include that node, and passes again once it is back.
func testPodToPod(t *testing.T) {
	ctx := t.Context()
	victim := c.Nodes[len(c.Nodes)-1]
	harness.Eventually(t, time.Minute, "every agent a ready peer", func() (bool, string) {
		slices, err := c.Client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + release})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready++
				}
			}
		}
		return ready == len(c.Nodes), fmt.Sprintf("%d of %d agent endpoints ready", ready, len(c.Nodes))
	})
	pods := agentPods(t)
	// Every chosen peer must answer; with three nodes each agent has at most
	// three candidates on other nodes, so it chooses all of them, the victim's
	// agent included.
	check := func(node string) (string, error) {
		return c.Kubectl(ctx, nil, "exec", "-n", namespace, pods[node].Name, "--", "/kube-node-ready-agent", "check",
			"--checks=network", "--check.network.peers=3", "--check.network.min-peers=3")
	}
	for _, n := range c.Nodes {
		if out, err := check(n.Name); err != nil {
			t.Fatalf("network check in the agent pod on %s before the cut: %v", n.Name, err)
		} else if !strings.Contains(out, "network") {
			t.Fatalf("check output names no network check: %s", out)
		}
	}
	if err := victim.CutPodNetwork(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.RestorePodNetwork(context.Background()) })
	victimPod := pods[victim.Name].Status.PodIP
	for _, n := range c.Nodes {
		if n == victim {
			continue
		}
		out, err := check(n.Name)
		if err == nil {
			t.Errorf("network check on %s passed with %s's pod network cut off:\n%s", n.Name, victim.Name, out)
		} else if !strings.Contains(out, victimPod) {
			t.Errorf("network check on %s failed without naming the unreachable peer %s:\n%s", n.Name, victimPod, out)
		}
	}
	if err := victim.RestorePodNetwork(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if out, err := check(n.Name); err != nil {
			t.Errorf("network check on %s after the pod network is back: %v\n%s", n.Name, err, out)
		}
	}
	harness.Eventually(t, time.Minute, "all nodes verified after the pod network is back", func() (bool, string) { return verified(t, realNodeNames()...) })
}

// testDNSOutageAndBypass: CoreDNS scaled to zero re-taints real nodes, no
// more than the fleet budget (10 % of 3 nodes: 1); the bypass annotation
// untaints the re-tainted node at once while DNS is still down; CoreDNS back
// untaints the rest.
func testDNSOutageAndBypass(t *testing.T) {
	ctx := t.Context()
	c.KubectlOK(t, "", "scale", "-n", "kube-system", "deployment/coredns", "--replicas=0")
	t.Cleanup(func() {
		_, _ = c.Kubectl(context.Background(), nil, "scale", "-n", "kube-system", "deployment/coredns", "--replicas=2")
	})
	var retainted []string
	harness.Eventually(t, 90*time.Second, "one node re-tainted", func() (bool, string) {
		retainted = nil
		for _, name := range realNodeNames() {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && tainted(n) {
				retainted = append(retainted, name)
			}
		}
		return len(retainted) >= 1, fmt.Sprintf("re-tainted: %v", retainted)
	})
	// Every agent has failed its threshold by now or soon; watch that the
	// budget holds over several more rounds of every agent.
	limit := 1
	agentRounds(t, 4, "more failing rounds", func() (bool, string) {
		var now []string
		for _, name := range realNodeNames() {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && tainted(n) {
				now = append(now, name)
			}
		}
		if len(now) == 1 {
			retainted = now
		}
		return len(now) <= limit, fmt.Sprintf("%d nodes re-tainted (%v), fleet budget is %d", len(now), now, limit)
	})
	// Why, where operators look.
	describe := c.KubectlOK(t, "", "describe", "node", retainted[0])
	if !strings.Contains(describe, "KubeNodeReady") || !strings.Contains(describe, "ChecksFailing") || !strings.Contains(describe, "failing: ") {
		t.Errorf("kubectl describe node %s does not show the agent's condition:\n%s", retainted[0], describe)
	}
	// A broken node carries the unhealthy taint, not the startup one:
	// autoscalers must not take it for a node that is still starting.
	if taints := describedTaints(describe); !slices.Contains(taints, unhealthyKey+"=true:NoSchedule") || slices.ContainsFunc(taints, func(t string) bool {
		return strings.HasPrefix(t, harness.StartupTaint.Key)
	}) {
		t.Errorf("kubectl describe node %s shows taints %q: want the %s taint and not %s", retainted[0], taints, unhealthyKey, harness.StartupTaint.Key)
	}
	events := c.KubectlOK(t, "", "get", "events", "-A", "--field-selector", "reason=RetaintSuppressed", "-o", "name")
	if strings.TrimSpace(events) == "" {
		t.Errorf("no RetaintSuppressed Event while %d of %d nodes were held by the budget", len(c.Nodes)-1, len(c.Nodes))
	}

	// The documented bypass: untaint at once, never re-taint.
	bypassed := retainted[0]
	c.KubectlOK(t, "", "annotate", "node", bypassed, skipAnnot+"=true")
	harness.Eventually(t, 30*time.Second, "bypassed node untainted while DNS is down", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, bypassed, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !tainted(n), fmt.Sprintf("taints %v", n.Spec.Taints)
	})
	agentRounds(t, 3, "rounds with the bypass", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, bypassed, metav1.GetOptions{})
		return err != nil || !tainted(n), fmt.Sprintf("bypassed node %s re-tainted: %v", bypassed, n.Spec.Taints)
	})

	c.KubectlOK(t, "", "scale", "-n", "kube-system", "deployment/coredns", "--replicas=2")
	if err := c.WaitCoreDNS(ctx, 2); err != nil {
		t.Fatal(err)
	}
	c.KubectlOK(t, "", "annotate", "node", bypassed, skipAnnot+"-")
	harness.Eventually(t, 90*time.Second, "nodes verified after CoreDNS is back", func() (bool, string) { return verified(t, realNodeNames()...) })
}

// testOwnNodePolicy: the ValidatingAdmissionPolicy holds against the agent
// pod's real projected token, read from the pod's volume on its node.
func testOwnNodePolicy(t *testing.T) {
	ctx := t.Context()
	own, other := c.Nodes[0], c.Nodes[1]
	pod := agentPods(t)[own.Name]
	token, err := own.Exec(ctx, "sh", "-c", fmt.Sprintf("cat /var/lib/kubelet/pods/%s/volumes/kubernetes.io~projected/*/token", pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.BearerToken = strings.TrimSpace(token)
	agent, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.CoreV1().Nodes().Get(ctx, own.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the agent's token cannot read its own node: %v", err)
	}
	patch := func(node, p string) error {
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(p), metav1.PatchOptions{})
		return err
	}
	if err := patch(other.Name, `{"metadata":{"labels":{"`+verifiedLabel+`":"false"}}}`); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Errorf("agent token on %s changing node %s: %v, want denied", own.Name, other.Name, err)
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, own.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taints := append(n.Spec.Taints, corev1.Taint{Key: "example.com/other", Value: "x", Effect: corev1.TaintEffectNoSchedule})
	n.Spec.Taints = taints
	if _, err := agent.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Errorf("agent token adding another taint to its own node: %v, want denied", err)
	}
}

// testDeleteNode: a real node switched off and deleted with kubectl is
// cleaned up by the webhook's leader and then goes away.
func testDeleteNode(t *testing.T) {
	ctx := t.Context()
	victim := c.Nodes[len(c.Nodes)-1]
	n, err := c.Client.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(n.Finalizers, finalizer) {
		t.Fatalf("node %s has no finalizer: %v", victim.Name, n.Finalizers)
	}
	if err := victim.Stop(); err != nil {
		t.Logf("stop %s: %v", victim.Name, err)
	}
	c.KubectlOK(t, "", "delete", "node", victim.Name, "--wait=false")
	harness.Eventually(t, time.Minute, "deleted node gone", func() (bool, string) {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get %s: %v", victim.Name, err)
	})
	events := c.KubectlOK(t, "", "get", "events", "-A", "--field-selector", "reason=CleanupCompleted,involvedObject.name="+victim.Name, "-o", "name")
	if strings.TrimSpace(events) == "" {
		t.Errorf("no CleanupCompleted Event for %s", victim.Name)
	}
	// Until PodGC removes the agent pod bound to the deleted node (after a
	// 40 s quarantine), the endpointslice controller refuses to update the
	// agents' Service ("Node not found"), so peers stay stale: wait it out.
	harness.Eventually(t, 2*time.Minute, "agent pod of the deleted node garbage-collected", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + victim.Name})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods still bound to %s", len(pods.Items), victim.Name)
	})
}

// testUpgrade: helm upgrade with a changed value rolls the pods, keeps every
// node verified and admission working with the same caBundle.
func testUpgrade(t *testing.T, vals string) {
	ctx := t.Context()
	names := realNodeNames()
	caBundle := func() []byte {
		m, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, release+"-webhook", metav1.GetOptions{})
		if err != nil || len(m.Webhooks) == 0 {
			t.Fatalf("webhook configuration: %v", err)
		}
		return m.Webhooks[0].ClientConfig.CABundle
	}
	before := caBundle()
	c.HelmT(t, "upgrade", release, chart, "--namespace", namespace, "--values", vals, "--set", "agent.logLevel=debug", "--set", "webhook.logLevel=debug", "--wait", "--timeout", "3m")
	c.KubectlOK(t, "", "rollout", "status", "-n", namespace, "daemonset/"+release, "--timeout=2m")
	c.KubectlOK(t, "", "rollout", "status", "-n", namespace, "deployment/"+release+"-webhook", "--timeout=2m")
	if ok, msg := verified(t, names...); !ok {
		t.Errorf("after upgrade: %s", msg)
	}
	if after := caBundle(); string(after) != string(before) {
		t.Errorf("caBundle changed by helm upgrade")
	}
	node, err := c.CreateNode(ctx, "after-upgrade", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Finalizers, finalizer) {
		t.Errorf("node created after the upgrade has finalizers %v, want %s from admission", got.Finalizers, finalizer)
	}
}

// testUninstall: helm uninstall runs the pre-delete Job on a real kubelet and
// leaves no node with the finalizer and no taint changed.
func testUninstall(t *testing.T) {
	ctx := t.Context()
	// A node that died with a CoreDNS pod leaves stale DNS endpoints for a
	// while, which can re-taint a peer: start from every node verified.
	harness.Eventually(t, 2*time.Minute, "every live real node verified", func() (bool, string) { return verified(t, liveNodeNames(t)...) })
	// Only the project's taints: the node lifecycle controller changes the
	// simulated node's own not-ready taint meanwhile.
	ours := func(n corev1.Node) string {
		var ts []string
		for _, t := range n.Spec.Taints {
			if harness.OurTaint(t.Key) {
				ts = append(ts, t.ToString())
			}
		}
		return strings.Join(ts, ",")
	}
	taintsBefore := map[string]string{}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		taintsBefore[n.Name] = ours(n)
	}
	out := c.HelmT(t, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
	t.Logf("helm uninstall: %s", strings.TrimSpace(out))
	nodes, err = c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if slices.Contains(n.Finalizers, finalizer) {
			t.Errorf("node %s still has %s after uninstall", n.Name, finalizer)
		}
		if got := ours(n); got != taintsBefore[n.Name] {
			t.Errorf("node %s taints changed by uninstall: %s -> %s", n.Name, taintsBefore[n.Name], got)
		}
	}
	// The hook Job ran as a pod on a real kubelet.
	jobs := c.KubectlOK(t, "", "get", "events", "-n", namespace, "--field-selector", "reason=Started", "-o", "jsonpath={range .items[*]}{.involvedObject.name}{\"\\n\"}{end}")
	if !strings.Contains(jobs, "uninstall") {
		t.Errorf("no container of the pre-delete Job started on a kubelet; Started events for: %s", jobs)
	}
}

// gateTimeout is the DaemonSet gate's timeout in these installs.
const gateTimeout = 20 * time.Second

// gateDaemonSet is a DaemonSet of the pause image pinned to one node whose
// pod turns Ready when a TCP probe of port answers: the API server's 443
// after readyAfter, or a closed port never.
func gateDaemonSet(name, node string, port int32, readyAfter time.Duration) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gate-test"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: node},
					// Like a CNI agent: it runs on nodes that are still starting.
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "pause", Image: "registry.k8s.io/pause:3.10.1", ImagePullPolicy: corev1.PullNever,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
								Host: harness.APIServerIP, Port: intstr.FromInt32(port),
							}},
							InitialDelaySeconds: int32(readyAfter.Seconds()), PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
}

// joinAndWatch joins a real node named name and returns when its startup
// taint is gone: the node's creation time and when the watch showed it
// untainted.
func joinAndWatch(t *testing.T, name string) (created, untainted time.Time) {
	t.Helper()
	ctx := t.Context()
	w, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.AddNode(ctx, harness.RealNodeOptions{Name: name, NoWait: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			node, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			created = node.CreationTimestamp.Time
			if !tainted(node) && node.Labels[verifiedLabel] == "true" {
				return created, time.Now()
			}
		case <-deadline:
			t.Fatalf("node %s joined but was not verified within 3m", name)
		}
	}
}

// testDaemonSetGate: a node joining while a DaemonSet that runs on it is
// not Ready keeps its startup taint until that DaemonSet's pod is Ready; a
// DaemonSet that never becomes Ready is reported on the node after the
// gate's timeout and no longer waited for.
func testDaemonSetGate(t *testing.T) {
	ctx := t.Context()
	c.KubectlOK(t, "", "create", "namespace", "gate-test")
	t.Cleanup(func() {
		_, _ = c.Kubectl(context.Background(), nil, "delete", "namespace", "gate-test", "--wait=false")
	})
	dss := c.Client.AppsV1().DaemonSets("gate-test")

	if _, err := dss.Create(ctx, gateDaemonSet("slow-ready", "gate-slow", 443, 10*time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, untainted := joinAndWatch(t, "gate-slow")
	pods, err := c.Client.CoreV1().Pods("gate-test").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=gate-slow"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("slow-ready pods on gate-slow: %v, %v", pods, err)
	}
	var readyAt time.Time
	for _, cond := range pods.Items[0].Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			readyAt = cond.LastTransitionTime.Time
		}
	}
	if readyAt.IsZero() {
		t.Fatalf("gate-slow untainted while its slow-ready pod is not Ready: %+v", pods.Items[0].Status.Conditions)
	}
	// Ready times have 1 s resolution.
	if untainted.Before(readyAt.Add(-time.Second)) {
		t.Errorf("gate-slow untainted at %s, before its slow-ready pod was Ready at %s", untainted.Format(time.RFC3339Nano), readyAt.Format(time.RFC3339))
	}
	t.Logf("gate-slow: creation -> slow-ready pod Ready %s, -> taint removed %s",
		readyAt.Sub(created).Round(time.Second), untainted.Sub(created).Round(time.Millisecond))

	if _, err := dss.Create(ctx, gateDaemonSet("never-ready", "gate-never", 1, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, untainted = joinAndWatch(t, "gate-never")
	if waited := untainted.Sub(created); waited < gateTimeout {
		t.Errorf("gate-never untainted %s after creation, before the gate's %s timeout", waited, gateTimeout)
	}
	events := c.KubectlOK(t, "", "get", "events", "-A", "--field-selector", "reason=DaemonSetGateTimeout,involvedObject.name=gate-never",
		"-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, "gate-test/never-ready") {
		t.Errorf("no DaemonSetGateTimeout Event naming gate-test/never-ready on gate-never: %q", events)
	}
	// Both nodes stay: later steps delete one, and every node they see is verified.
	if err := dss.Delete(ctx, "never-ready", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}

// describedTaints returns the taints kubectl describe node lists: the value
// of its "Taints:" line and the indented lines that continue it.
func describedTaints(describe string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(describe, "\n") {
		switch {
		case strings.HasPrefix(line, "Taints:"):
			in = true
			line = strings.TrimPrefix(line, "Taints:")
		case in && strings.HasPrefix(line, " "):
		default:
			in = false
		}
		if in {
			if f := strings.TrimSpace(line); f != "" && f != "<none>" {
				out = append(out, f)
			}
		}
	}
	return out
}
