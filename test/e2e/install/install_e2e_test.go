//go:build e2e

package install_test

import (
	"context"
	"fmt"
	"net"
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
	"github.com/kube-node-ready/kube-node-ready/test/e2e/installkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// agentRounds waits until the loop of every running agent pod has run n
// more times (node_ready_loop_iterations_total), hold holding all along:
// what "nothing happened" on the nodes is anchored on.
func agentRounds(t *testing.T, n int, what string, hold func() (bool, string)) {
	t.Helper()
	var urls []string
	for _, p := range kit.AgentPods(t) {
		urls = append(urls, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(harness.MetricsPort))+"/metrics")
	}
	harness.WaitCountersAt(t, urls, harness.Counter{Name: "node_ready_loop_iterations_total"}, n, what, hold)
}

// metric reads one metric (summed over the series matching match) from a
// pod's :8080/metrics at its pod IP.
func metric(podIP, name string, match ...string) (float64, error) {
	return harness.ScrapeMetric("http://"+net.JoinHostPort(podIP, strconv.Itoa(harness.MetricsPort))+"/metrics", name, match...)
}

// TestChartOnRealNodes: the chart installed with helm on real nodes, then
// a node joining, the pod network and DNS checks, the own-node policy
// against a real token, the DaemonSet gate, a node deleted, the CSI drivers
// gate; each step starts from where the one before left the cluster.
func TestChartOnRealNodes(t *testing.T) {
	vals := kit.Values(t)
	installkit.Steps(t, []installkit.Step{
		{Name: "install", Run: func(t *testing.T) { testInstall(t, vals) }},
		{Name: "join", Run: testJoin},
		{Name: "pod-to-pod", Run: testPodToPod},
		{Name: "dns-outage-and-bypass", Run: testDNSOutageAndBypass},
		{Name: "own-node-policy", Run: testOwnNodePolicy},
		{Name: "daemonset-gate", Run: testDaemonSetGate},
		{Name: "delete-node", Run: testDeleteNode},
		{Name: "csi-drivers-gate", Run: testCSIDriversGate},
	})
}

// testInstall: helm install with default values (images local); every real
// node's agent pod runs, the nodes are verified, the logs are JSON lines
// naming the node, and every agent serves /metrics at its pod IP.
func testInstall(t *testing.T, vals string) {
	kit.Install(t, vals)

	pods := kit.AgentPods(t)
	for _, n := range kit.C.Nodes {
		p, ok := pods[n.Name]
		if !ok {
			t.Fatalf("no Running agent pod on %s", n.Name)
		}
		v, err := metric(p.Status.PodIP, "node_ready_verified")
		if err != nil || v != 1 {
			t.Errorf("agent on %s: node_ready_verified = %v, %v", n.Name, v, err)
		}
	}
	logs := kit.C.KubectlOK(t, "", "logs", "-n", installkit.Namespace, "-l", "app=kube-node-ready", "--tail=-1", "--prefix=false")
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	for _, n := range kit.C.Nodes {
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
	w, err := kit.C.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// No --register-with-taints: the install path is the chart's admission
	// adding the startup taint (webhook.startupTaint.inject, on by default).
	// The cluster's first nodes registered with the kubelet flag.
	n, err := kit.C.AddNode(ctx, harness.RealNodeOptions{NoWait: true, Taints: []corev1.Taint{}})
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
				if !slices.Contains(node.Finalizers, installkit.Finalizer) {
					t.Errorf("node %s first seen without the finalizer %s (finalizers %v): admission did not add it", n.Name, installkit.Finalizer, node.Finalizers)
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
				// The agents of the first nodes are in their Service's slices by
				// now, so admission names the new node's first peer slices; the
				// join below then starts from them.
				if names, _ := api.ParsePeerSlices(node.Annotations[api.PeerSlicesAnnotation]); len(names) == 0 {
					t.Errorf("node %s first seen with peer slices hint %q, want the slices admission names (%s)",
						n.Name, node.Annotations[api.PeerSlicesAnnotation], api.PeerSlicesAnnotation)
				}
			}
			if !installkit.Tainted(node) && node.Labels[installkit.VerifiedLabel] == "true" {
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
	victim := kit.C.Nodes[len(kit.C.Nodes)-1]
	harness.Eventually(t, time.Minute, "every agent a ready peer", func() (bool, string) {
		slices, err := kit.C.Client.DiscoveryV1().EndpointSlices(installkit.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + installkit.Release})
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
		return ready == len(kit.C.Nodes), fmt.Sprintf("%d of %d agent endpoints ready", ready, len(kit.C.Nodes))
	})
	pods := kit.AgentPods(t)
	// Every chosen peer must answer; with three nodes each agent has at most
	// three candidates on other nodes, so it chooses all of them, the victim's
	// agent included.
	check := func(node string) (string, error) {
		return kit.C.Kubectl(ctx, nil, "exec", "-n", installkit.Namespace, pods[node].Name, "--", "/kube-node-ready-agent", "check",
			"--checks=network", "--check.network.peers=3", "--check.network.min-peers=3")
	}
	for _, n := range kit.C.Nodes {
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
	for _, n := range kit.C.Nodes {
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
	for _, n := range kit.C.Nodes {
		if out, err := check(n.Name); err != nil {
			t.Errorf("network check on %s after the pod network is back: %v\n%s", n.Name, err, out)
		}
	}
	harness.Eventually(t, time.Minute, "all nodes verified after the pod network is back", func() (bool, string) { return kit.Verified(t, kit.RealNodeNames()...) })
}

// testDNSOutageAndBypass: CoreDNS scaled to zero re-taints real nodes, no
// more than the fleet budget (10 % of 3 nodes: 1); the bypass annotation
// untaints the re-tainted node at once while DNS is still down; CoreDNS back
// untaints the rest.
func testDNSOutageAndBypass(t *testing.T) {
	ctx := t.Context()
	kit.C.KubectlOK(t, "", "scale", "-n", "kube-system", "deployment/coredns", "--replicas=0")
	t.Cleanup(func() {
		_, _ = kit.C.Kubectl(context.Background(), nil, "scale", "-n", "kube-system", "deployment/coredns", "--replicas=2")
	})
	var retainted []string
	harness.Eventually(t, 90*time.Second, "one node re-tainted", func() (bool, string) {
		retainted = nil
		for _, name := range kit.RealNodeNames() {
			n, err := kit.C.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && installkit.Tainted(n) {
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
		for _, name := range kit.RealNodeNames() {
			n, err := kit.C.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && installkit.Tainted(n) {
				now = append(now, name)
			}
		}
		if len(now) == 1 {
			retainted = now
		}
		return len(now) <= limit, fmt.Sprintf("%d nodes re-tainted (%v), fleet budget is %d", len(now), now, limit)
	})
	// Why, where operators look.
	describe := kit.C.KubectlOK(t, "", "describe", "node", retainted[0])
	if !strings.Contains(describe, "KubeNodeReady") || !strings.Contains(describe, "ChecksFailing") || !strings.Contains(describe, "failing: ") {
		t.Errorf("kubectl describe node %s does not show the agent's condition:\n%s", retainted[0], describe)
	}
	// A broken node carries the unhealthy taint, not the startup one:
	// autoscalers must not take it for a node that is still starting.
	if taints := describedTaints(describe); !slices.Contains(taints, installkit.UnhealthyKey+"=true:NoSchedule") || slices.ContainsFunc(taints, func(t string) bool {
		return strings.HasPrefix(t, harness.StartupTaint.Key)
	}) {
		t.Errorf("kubectl describe node %s shows taints %q: want the %s taint and not %s", retainted[0], taints, installkit.UnhealthyKey, harness.StartupTaint.Key)
	}
	events := kit.C.KubectlOK(t, "", "get", "events", "-A", "--field-selector", "reason=RetaintSuppressed", "-o", "name")
	if strings.TrimSpace(events) == "" {
		t.Errorf("no RetaintSuppressed Event while %d of %d nodes were held by the budget", len(kit.C.Nodes)-1, len(kit.C.Nodes))
	}

	// The documented bypass: untaint at once, never re-taint.
	bypassed := retainted[0]
	kit.C.KubectlOK(t, "", "annotate", "node", bypassed, installkit.SkipAnnotation+"=true")
	harness.Eventually(t, 30*time.Second, "bypassed node untainted while DNS is down", func() (bool, string) {
		n, err := kit.C.Client.CoreV1().Nodes().Get(ctx, bypassed, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !installkit.Tainted(n), fmt.Sprintf("taints %v", n.Spec.Taints)
	})
	agentRounds(t, 3, "rounds with the bypass", func() (bool, string) {
		n, err := kit.C.Client.CoreV1().Nodes().Get(ctx, bypassed, metav1.GetOptions{})
		return err != nil || !installkit.Tainted(n), fmt.Sprintf("bypassed node %s re-tainted: %v", bypassed, n.Spec.Taints)
	})

	kit.C.KubectlOK(t, "", "scale", "-n", "kube-system", "deployment/coredns", "--replicas=2")
	if err := kit.C.WaitCoreDNS(ctx, 2); err != nil {
		t.Fatal(err)
	}
	kit.C.KubectlOK(t, "", "annotate", "node", bypassed, installkit.SkipAnnotation+"-")
	harness.Eventually(t, 90*time.Second, "nodes verified after CoreDNS is back", func() (bool, string) { return kit.Verified(t, kit.RealNodeNames()...) })
}

// testOwnNodePolicy: the ValidatingAdmissionPolicy holds against the agent
// pod's real projected token, read from the pod's volume on its node.
func testOwnNodePolicy(t *testing.T) {
	ctx := t.Context()
	own, other := kit.C.Nodes[0], kit.C.Nodes[1]
	pod := kit.AgentPods(t)[own.Name]
	token, err := own.Exec(ctx, "sh", "-c", fmt.Sprintf("cat /var/lib/kubelet/pods/%s/volumes/kubernetes.io~projected/*/token", pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(kit.C.Config)
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
	if err := patch(other.Name, `{"metadata":{"labels":{"`+installkit.VerifiedLabel+`":"false"}}}`); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Errorf("agent token on %s changing node %s: %v, want denied", own.Name, other.Name, err)
	}
	n, err := kit.C.Client.CoreV1().Nodes().Get(ctx, own.Name, metav1.GetOptions{})
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
	victim := kit.C.Nodes[len(kit.C.Nodes)-1]
	n, err := kit.C.Client.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(n.Finalizers, installkit.Finalizer) {
		t.Fatalf("node %s has no finalizer: %v", victim.Name, n.Finalizers)
	}
	if err := victim.Stop(); err != nil {
		t.Logf("stop %s: %v", victim.Name, err)
	}
	kit.C.KubectlOK(t, "", "delete", "node", victim.Name, "--wait=false")
	harness.Eventually(t, time.Minute, "deleted node gone", func() (bool, string) {
		_, err := kit.C.Client.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get %s: %v", victim.Name, err)
	})
	// The webhook's event recorder writes the Event from a queue of its own,
	// so on busy cores it can land after the finalizer's removal let the
	// Node go (a warm make test saw it so).
	harness.Eventually(t, 30*time.Second, "CleanupCompleted Event for "+victim.Name, func() (bool, string) {
		events, err := kit.C.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=CleanupCompleted,involvedObject.name=" + victim.Name})
		if err != nil {
			return false, err.Error()
		}
		return len(events.Items) > 0, "none yet"
	})
	// Until PodGC removes the agent pod bound to the deleted node (after a
	// 40 s quarantine), the endpointslice controller refuses to update the
	// agents' Service ("Node not found"), so peers stay stale: wait it out.
	harness.Eventually(t, 2*time.Minute, "agent pod of the deleted node garbage-collected", func() (bool, string) {
		pods, err := kit.C.Client.CoreV1().Pods(installkit.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + victim.Name})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods still bound to %s", len(pods.Items), victim.Name)
	})
}

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
	w, err := kit.C.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := kit.C.AddNode(ctx, harness.RealNodeOptions{Name: name, NoWait: true}); err != nil {
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
			if !installkit.Tainted(node) && node.Labels[installkit.VerifiedLabel] == "true" {
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
	kit.C.KubectlOK(t, "", "create", "namespace", "gate-test")
	t.Cleanup(func() {
		_, _ = kit.C.Kubectl(context.Background(), nil, "delete", "namespace", "gate-test", "--wait=false")
	})
	dss := kit.C.Client.AppsV1().DaemonSets("gate-test")

	if _, err := dss.Create(ctx, gateDaemonSet("slow-ready", "gate-slow", 443, 10*time.Second), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, untainted := joinAndWatch(t, "gate-slow")
	pods, err := kit.C.Client.CoreV1().Pods("gate-test").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=gate-slow"})
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
	if waited := untainted.Sub(created); waited < installkit.GateTimeout {
		t.Errorf("gate-never untainted %s after creation, before the gate's %s timeout", waited, installkit.GateTimeout)
	}
	events := kit.C.KubectlOK(t, "", "get", "events", "-A", "--field-selector", "reason=DaemonSetGateTimeout,involvedObject.name=gate-never",
		"-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, "gate-test/never-ready") {
		t.Errorf("no DaemonSetGateTimeout Event naming gate-test/never-ready on gate-never: %q", events)
	}
	// Both nodes stay: the next step deletes one.
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
