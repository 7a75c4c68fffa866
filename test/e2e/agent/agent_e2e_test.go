//go:build e2e

package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestThreeNodesVerifiedWithEventsAndMetrics(t *testing.T) {
	kit.ThreeNodesVerifiedWithEventsAndMetrics(t, "verify")
}

func TestWaitsForKarpenterUnregisteredTaint(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	unregistered := corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}
	n := cp.NewNode(t, "karpenter", harness.NodeOptions{ExtraTaints: []corev1.Taint{unregistered}})
	a := startAgent(t, n)
	// Several looks at the node: the agent must not have touched it.
	a.Looped(t, 3, "waiting for karpenter.sh/unregistered", nodeHolds(t, n.Name, "untouched while karpenter.sh/unregistered is on it",
		func(node *corev1.Node) bool { return tainted(node) && node.Labels["node-ready/verified"] == "" }))
	if !logContains(a.Process, "waiting for taint to be removed") {
		t.Error("agent did not log that it waits for the karpenter taint")
	}
	patch := `[{"op":"test","path":"/spec/taints/1/key","value":"karpenter.sh/unregistered"},{"op":"remove","path":"/spec/taints/1"}]`
	if _, err := cp.Client.CoreV1().Nodes().Patch(t.Context(), n.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, n.Name, 10*time.Second, "verified", verified)
}

func TestBypassAnnotationWithKubectl(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	n := cp.NewNode(t, "bypass", harness.NodeOptions{})
	// A name that never resolves keeps the dns check failing.
	a := startAgent(t, n, "--check.dns.names=does-not-exist.default.svc.cluster.local", "--retaint-threshold=2")
	a.Looped(t, 2, "failing rounds", nodeHolds(t, n.Name, "tainted although the dns check fails", tainted))
	out, err := exec.CommandContext(t.Context(), filepath.Join(cp.BinDir, "kubectl"), "--kubeconfig", cp.Kubeconfig,
		"annotate", "node", n.Name, "node-ready/skip-verification=true").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl annotate: %v: %s", err, out)
	}
	cp.WaitNode(t, n.Name, 5*time.Second, "untainted", func(n *corev1.Node) bool { return !tainted(n) })
	// Checks would keep failing; with the annotation the node is never
	// re-tainted (twice the threshold of looks at it).
	a.Looped(t, 4, "bypassed", nodeHolds(t, n.Name, "untainted while the bypass annotation is set", func(n *corev1.Node) bool { return !tainted(n) }))
}

func TestAPICheckReportsMissingPermission(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	n := cp.NewNode(t, "no-rbac", harness.NodeOptions{})
	kubeconfig := nodeKubeconfig(t, "no-permissions", n)
	cmd := exec.CommandContext(t.Context(), harness.BuiltBinary(t, harness.AgentBinary), "check", "--checks=api", "--node-name="+n.Name, "--kubeconfig="+kubeconfig)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("check exit = %v, want status 1; output:\n%s", err, out)
	}
	for _, want := range []string{"api", "FAIL", "not authorized to get node " + n.Name} {
		if !strings.Contains(string(out), want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if !tainted(cp.GetNode(t, n.Name)) {
		t.Error("check subcommand touched the taint")
	}
}

func TestCheckSubcommandPassesOnHealthyNode(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	n := cp.NewNode(t, "check-ok", harness.NodeOptions{})
	args := append([]string{"check"}, baseArgs(n, nodeKubeconfig(t, agentSA, n))...)
	out, err := exec.CommandContext(t.Context(), harness.BuiltBinary(t, harness.AgentBinary), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	for _, c := range []string{"dns", "api", "network", "discovery"} {
		if !strings.Contains(string(out), c+"  ") {
			t.Errorf("table lacks a %s row:\n%s", c, out)
		}
	}
	if !strings.Contains(string(out), "all checks passed") {
		t.Errorf("no verdict in:\n%s", out)
	}
}

func TestPodToPod(t *testing.T) {
	agents := startFleet(t, "p2p", 3)
	nodes := []harness.Node{agents[0].Node, agents[1].Node, agents[2].Node}
	for _, n := range nodes {
		cp.WaitNode(t, n.Name, 20*time.Second, "verified", verified)
	}
	self := nodes[0]
	check := func() (string, error) {
		args := append([]string{"check", "--checks=network", "--check.network.peers=3"}, baseArgs(self, nodeKubeconfig(t, agentSA, self))...)
		out, err := exec.CommandContext(t.Context(), harness.BuiltBinary(t, harness.AgentBinary), args...).CombinedOutput()
		return string(out), err
	}
	// One peer agent stopped: the others (and the DNS pod) still answer.
	if err := agents[1].Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if out, err := check(); err != nil {
		t.Fatalf("network check failed with one peer down: %v\n%s", err, out)
	}
	// Every peer unreachable: the other agent and CoreDNS stopped.
	if err := agents[2].Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cp.StopDNS(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.StartDNS(context.Background()); err != nil {
			t.Errorf("restart coredns: %v", err)
		}
	})
	// After a first attempt with too few answers the check reads the peers
	// again, and on busy cores the stopped agents may have left the list by
	// then (a warm make test saw "0 of 1"): what matters is that none answered.
	out, err := check()
	if err == nil || !noPeerAnswered.MatchString(out) {
		t.Fatalf("network check with all peers down: err=%v, want a failure naming 0 of its peers:\n%s", err, out)
	}
}

// noPeerAnswered is the network check's verdict when none of its peers did.
var noPeerAnswered = regexp.MustCompile(`pod-to-pod: 0 of [1-9][0-9]* peers answered`)

func TestRetaintWithinFleetBudgetAndRecovery(t *testing.T) {
	kit.RetaintWithinFleetBudgetAndRecovery(t, "fleet")
}

func TestSIGTERMExitsPromptlyAndLeavesTaint(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	for _, tc := range []struct {
		name  string
		extra []string
		ready func(*corev1.Node) bool
	}{
		{name: "sigterm-tainted", extra: []string{"--check.dns.names=does-not-exist.default.svc.cluster.local"}, ready: tainted},
		{name: "sigterm-verified", ready: verified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := cp.NewNode(t, tc.name, harness.NodeOptions{})
			a := startAgent(t, n, tc.extra...)
			cp.WaitNode(t, n.Name, 20*time.Second, "settled", tc.ready)
			// Pacing, not an assertion: SIGTERM most likely lands mid-round.
			time.Sleep(1500 * time.Millisecond)
			before := cp.GetNode(t, n.Name)
			start := time.Now()
			if err := a.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-a.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("agent still running 10 s after SIGTERM")
			}
			t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
			if _, err := a.Exited(); err != nil {
				t.Errorf("agent exit after SIGTERM: %v", err)
			}
			after := cp.GetNode(t, n.Name)
			if tainted(before) != tainted(after) || before.Labels["node-ready/verified"] != after.Labels["node-ready/verified"] {
				t.Errorf("SIGTERM changed the node: taints %v -> %v", before.Spec.Taints, after.Spec.Taints)
			}
		})
	}
}

func TestAPIServerUnreachable(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	n := cp.NewNode(t, "unreachable", harness.NodeOptions{})
	kubeconfig := nodeKubeconfig(t, agentSA, n)
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens on 10.213.0.1:444.
	broken := filepath.Join(t.TempDir(), "broken.kubeconfig")
	if err := os.WriteFile(broken, []byte(strings.ReplaceAll(string(b), ":443", ":444")), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, n, "--kubeconfig="+broken)
	// No round runs before the node's watch has listed it; the positive
	// signal is the agent's own log: its node watch kept retrying, through
	// three of its backoff steps (about 3 s), and the agent never exited.
	nodeWatchTries := func() int {
		n := 0
		for _, line := range strings.Split(a.LogT(t), "\n") {
			if strings.Contains(line, `"type":"*v1.Node"`) && strings.Contains(line, "connection refused") {
				n++
			}
		}
		return n
	}
	harness.Eventually(t, 30*time.Second, "three refused tries of the node's watch", func() (bool, string) {
		if exited, err := a.Exited(); exited {
			t.Fatalf("agent exited with the API server unreachable: %v", err)
		}
		got := nodeWatchTries()
		return got >= 3, fmt.Sprintf("%d refused tries of the node's watch logged", got)
	})
	if code, _ := httpGet(t, a.URL("/healthz")); code != 200 {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, _ := httpGet(t, a.URL("/readyz")); code != 503 {
		t.Errorf("/readyz = %d, want 503", code)
	}
	if !tainted(cp.GetNode(t, n.Name)) {
		t.Error("taint changed")
	}
}

func TestNodeDeletedUnderTheAgent(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	n := cp.NewNode(t, "vanishing", harness.NodeOptions{})
	a := startAgent(t, n)
	cp.WaitNode(t, n.Name, 20*time.Second, "verified", verified)
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), n.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the agent logs the missing node", func() (bool, string) {
		return logContains(a.Process, "node not found; waiting"), a.Tail(5)
	})
	a.Looped(t, 2, "looks for the missing node", func() (bool, string) {
		exited, err := a.Exited()
		return !exited, fmt.Sprintf("agent exited when its node was deleted: %v", err)
	})
	// The node comes back under the same name (a replaced VM): verified again.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{harness.StartupTaint}}}
	if _, err := cp.Client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, n.Name, 20*time.Second, "verified after re-creation", verified)
}

// TestFailedUntaintIsRetriedWithinSeconds: a passed round whose patch the API
// server refuses is retried on a backoff, not a whole period later.
func TestFailedUntaintIsRetriedWithinSeconds(t *testing.T) {
	ctx := t.Context()
	admission := cp.Client.AdmissionregistrationV1()
	name := "refuse-agent-writes"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "agent", Expression: `request.userInfo.username == "system:serviceaccount:` + harness.AgentNamespace + `:` + agentSA + `"`,
			}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "agent writes refused by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindingGone := false
	t.Cleanup(func() {
		if !bindingGone {
			_ = admission.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})

	n := cp.NewNode(t, "write-refused", harness.NodeOptions{})
	// The policy compiles asynchronously: wait until the agent's own writes are refused.
	cfg := rest.AnonymousClientConfig(cp.Config)
	kubeconfig := nodeKubeconfig(t, agentSA, n)
	loaded, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BearerToken = loaded.BearerToken
	agentClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A write the chart's own-node policy allows (the verified label), so
	// only this test's policy can refuse it.
	probe := []byte(`[{"op":"add","path":"/metadata/labels/node-ready~1verified","value":"probe"}]`)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := agentClient.CoreV1().Nodes().Patch(ctx, n.Name, types.JSONPatchType, probe, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("policy never took effect: %v", err)
	}

	a := startAgent(t, n, "--check-period=1m")
	// Two refused writes: the agent has retried once on its own.
	harness.Eventually(t, 10*time.Second, "the agent retried the refused write", func() (bool, string) {
		return logCount(a.Process, "update node failed") >= 2, a.Tail(10)
	})
	if !tainted(cp.GetNode(t, n.Name)) {
		t.Fatal("node untainted although the agent's writes are refused")
	}
	if err := admission.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bindingGone = true
	// Well inside the 1 minute period: the retry backoff, not the next round, untaints.
	cp.WaitNode(t, n.Name, 20*time.Second, "verified after writes are allowed again", verified)
}
