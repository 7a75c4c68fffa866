//go:build e2e

// Package chart_test checks the Helm chart with the real helm, promtool and
// API server: lint, schema, server-side acceptance of every object, the
// own-node admission policy, and uninstall.
package chart_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	release   = "knr"
	namespace = "kube-node-ready"
	// agentSA is the agent ServiceAccount the chart creates for release "knr".
	agentSA = "knr-kube-node-ready"
)

var (
	cp    *harness.ControlPlane
	root  string
	chart string
)

func TestMain(m *testing.M) {
	if err := harness.EnterNetworkNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var err error
	if root, err = harness.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	chart = filepath.Join(root, "charts", "kube-node-ready")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cp, err = harness.Start(ctx, harness.Options{Logf: log.Printf})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "control plane logs:\n%s", cp.Logs(40))
	}
	cp.Stop()
	os.Exit(code)
}

// helm runs the real helm against the harness API server.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(cp.BinDir, "helm"), append(args, "--kubeconfig", cp.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestLint(t *testing.T) {
	for _, sets := range [][]string{
		nil,
		{"--set", "webhook.certificates.mode=cert-manager", "--set", "webhook.clientCA=pem"},
		{"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
			"--set", "monitoring.grafanaDashboard.enabled=true", "--set", "networkPolicy.enabled=true"},
	} {
		args := append([]string{"lint", chart, "--kube-version", "1.36.0", "--strict"}, sets...)
		if out, err := helm(t, args...); err != nil {
			t.Errorf("helm %v: %v\n%s", args, err, out)
		}
	}
}

// TestAlertRules renders the PrometheusRule, checks its rules with promtool
// and runs the promtool unit tests in testdata against them.
func TestAlertRules(t *testing.T) {
	out, err := helm(t, "template", release, chart, "-n", namespace, "--kube-version", "1.36.0",
		"--set", "monitoring.prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var rule struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &rule); err != nil {
		t.Fatal(err)
	}
	rules, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.CommandContext(t.Context(), "promtool", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// TestInvalidValuesNameTheValue: the values schema rejects bad input before
// anything reaches the cluster.
func TestInvalidValuesNameTheValue(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"agent.checkPeriod=-5s", "checkPeriod"},
		{"agent.checks={dns,ping}", "checks"},
		{"agent.maxRetainted=0", "maxRetainted"},
		{"agent.startupTaint.effect=Sometimes", "effect"},
		{"webhook.certificates.mode=vault", "mode"},
		{"webhook.replicas=0", "replicas"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := helm(t, "template", release, chart, "-n", namespace, "--kube-version", "1.36.0", "--set", tc.set)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("helm template --set %s: err=%v, want a schema error naming %q:\n%s", tc.set, err, tc.want, out)
			}
		})
	}
}

func TestInstallAndOwnNodePolicy(t *testing.T) {
	ctx := t.Context()
	if out, err := helm(t, "install", release, chart, "-n", namespace, "--create-namespace"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	// Every object was accepted by server-side validation; the DaemonSet is there.
	if _, err := cp.Client.AppsV1().DaemonSets(namespace).Get(ctx, agentSA, metav1.GetOptions{}); err != nil {
		t.Fatalf("agent DaemonSet: %v", err)
	}

	other := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	a, err := cp.CreateNode(ctx, "policy-a", harness.NodeOptions{ExtraTaints: []corev1.Taint{other}, Labels: map[string]string{"team": "infra"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cp.CreateNode(ctx, "policy-b", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token, err := cp.NodeToken(ctx, namespace, agentSA, a.Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = token
	agent, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(node, p string) error {
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, []byte(p), metav1.PatchOptions{})
		return err
	}
	untaint := `[{"op":"test","path":"/spec/taints/0/key","value":"node-ready/unverified"},{"op":"remove","path":"/spec/taints/0"},{"op":"add","path":"/metadata/labels/node-ready~1verified","value":"true"}]`

	// The policy is compiled asynchronously after install: wait until it denies.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		err := patch(b.Name, untaint)
		if err == nil {
			// Accepted before the policy took effect: put the taint back and try again.
			restore := `[{"op":"add","path":"/spec/taints","value":[{"key":"node-ready/unverified","value":"true","effect":"NoSchedule"}]}]`
			if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, b.Name, types.JSONPatchType, []byte(restore), metav1.PatchOptions{}); err != nil {
				return false, err
			}
			return false, nil
		}
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
	})
	if err != nil {
		t.Fatalf("the admission policy never denied the agent of node A untainting node B: %v", err)
	}
	if err := patch(b.Name, untaint); err == nil || !strings.Contains(err.Error(), "may not change node policy-b") {
		t.Errorf("untaint of node B by node A's agent: %v, want a denial naming node B", err)
	}
	denied := map[string]string{
		"another taint":   `[{"op":"remove","path":"/spec/taints/1"}]`,
		"another label":   `[{"op":"replace","path":"/metadata/labels/team","value":"web"}]`,
		"an annotation":   `[{"op":"add","path":"/metadata/annotations","value":{"x":"y"}}]`,
		"unschedulable":   `[{"op":"add","path":"/spec/unschedulable","value":true}]`,
		"remove a label":  `[{"op":"remove","path":"/metadata/labels/team"}]`,
		"add other taint": `[{"op":"add","path":"/spec/taints/-","value":{"key":"evil","effect":"NoExecute"}}]`,
	}
	for what, p := range denied {
		if err := patch(a.Name, p); err == nil || !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) {
			t.Errorf("agent changing %s on its own node: err = %v, want denied", what, err)
		}
	}
	if err := patch(a.Name, untaint); err != nil {
		t.Fatalf("agent untainting its own node: %v", err)
	}
	got, err := cp.Client.CoreV1().Nodes().Get(ctx, a.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != other.Key || got.Labels["node-ready/verified"] != "true" || got.Labels["team"] != "infra" {
		t.Errorf("after own untaint: taints=%v labels=%v", got.Spec.Taints, got.Labels)
	}
	// Re-taint of its own node is allowed too.
	retaint := `[{"op":"add","path":"/spec/taints/-","value":{"key":"node-ready/unverified","value":"true","effect":"NoSchedule"}},{"op":"replace","path":"/metadata/labels/node-ready~1verified","value":"false"}]`
	if err := patch(a.Name, retaint); err != nil {
		t.Errorf("agent re-tainting its own node: %v", err)
	}
}

// TestManifestsMatchChart fails when manifests/ drifts from the chart: run
// `make manifests` after changing the chart.
func TestManifestsMatchChart(t *testing.T) {
	out, err := helm(t, "template", "kube-node-ready", chart, "--namespace", "kube-node-ready", "--kube-version", "1.36.0")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	committed, err := os.ReadFile(filepath.Join(root, "manifests", "kube-node-ready.yaml"))
	if err != nil {
		t.Fatalf("%v (run `make manifests`)", err)
	}
	_, body, _ := strings.Cut(string(committed), "\n") // the generated-by header
	if body != out {
		t.Fatal("manifests/kube-node-ready.yaml differs from the chart rendered with default values; run `make manifests`")
	}
}
