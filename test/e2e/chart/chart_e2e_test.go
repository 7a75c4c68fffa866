//go:build e2e

package chart_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/hack/manifestgen"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
	cleanupplugins "github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup/plugins"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	release   = "knr"
	namespace = "kube-node-ready"
	// agentSA is the agent ServiceAccount the chart creates for release "knr".
	agentSA   = "knr-kube-node-ready"
	finalizer = "infra.894.io/node-cleanup"
)

var (
	cp    *harness.ControlPlane
	root  string
	chart string
)

// helm runs the real helm against the harness API server.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return cp.Helm(t.Context(), args...)
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

// TestHelmAssumesThePinnedKubernetes: the helm built by make tools, like a
// release build, assumes the pinned Kubernetes version, so `helm template`
// and `helm lint` of the chart (kubeVersion >= 1.30) work without
// --kube-version.
func TestHelmAssumesThePinnedKubernetes(t *testing.T) {
	for _, args := range [][]string{
		{"template", release, chart},
		{"lint", chart, "--strict"},
	} {
		// Rendered offline: no cluster to ask for its version.
		out, err := helm(t, append(args, "--kubeconfig", "/dev/null")...)
		if err != nil {
			t.Errorf("helm %v without --kube-version: %v\n%s", args, err, out)
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
	// The Events an alert tells the reader to look at exist: each name is
	// one the binaries record.
	named := regexp.MustCompile(`\b([A-Z][a-z]+[A-Z][A-Za-z]+) Events?\b`).FindAllStringSubmatch(out, -1)
	if len(named) < 5 {
		t.Errorf("the alerts name %d Events, want the 5 or more they named when this test was written", len(named))
	}
	for _, m := range named {
		if !slices.Contains(api.EventReasons(), m[1]) {
			t.Errorf("an alert names the %s Event, which no binary records (internal/api/events.go)", m[1])
		}
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
	promtool, err := harness.FirstTool(cp.BinDir, "promtool")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
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
		{"autoscaler=gke", "autoscaler"},
		{"agent.previousTaintKeys={karpenter.sh/unregistered}", "previousTaintKeys"},
		{"agent.previousTaintKeys={node.kubernetes.io/unreachable}", "previousTaintKeys"},
		{"webhook.certificates.mode=vault", "mode"},
		{"webhook.certificates.mode=", "mode"},
		{"webhook.cleanup.plugins.ceph.enabled=true", "ceph"},
		{"webhook.clientCA=pem", "certificates/mode"},
		{"webhook.replicas=0", "replicas"},
		{"webhook.remediation.policy=delete", "policy"},
		{"webhook.remediation.unverifiedDeadline=0s", "unverifiedDeadline"},
		{"webhook.remediation.maxReplacing=150%", "maxReplacing"},
		{"webhook.remediation.stallAfter=0s", "stallAfter"},
		{"webhook.remediation.breaker.threshold=0%", "threshold"},
		{"webhook.remediation.breaker.window=0", "window"},
		{"webhook.cleanup.healthInterval=soon", "healthInterval"},
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
	agent, err := cp.TokenClient(token)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(node, p string) error {
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, []byte(p), metav1.PatchOptions{})
		return err
	}
	untaint := mustPatch(t, jsonpatch.Test("/spec/taints/0/key", harness.StartupTaint.Key), jsonpatch.Remove("/spec/taints/0"),
		jsonpatch.Add("/metadata/labels/node-ready~1verified", "true"))

	// The policy is compiled asynchronously after install: wait until it denies.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		err := patch(b.Name, untaint)
		if err == nil {
			// Accepted before the policy took effect: put the taint back and try again.
			restore := mustPatch(t, jsonpatch.Add("/spec/taints", []corev1.Taint{harness.StartupTaint}))
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
	// Re-taint of its own node, with the re-taint taint, is allowed too.
	retaint := mustPatch(t, jsonpatch.Add("/spec/taints/-", harness.UnhealthyTaint), jsonpatch.Replace("/metadata/labels/node-ready~1verified", "false"))
	if err := patch(a.Name, retaint); err != nil {
		t.Errorf("agent re-tainting its own node: %v", err)
	}

	// In status: its own KubeNodeReady condition on its own node, nothing else.
	statusPatch := func(node, condType string) error {
		p := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"True","reason":"ChecksPassed","message":"m"}]}}`, condType)
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{}, "status")
		return err
	}
	if err := statusPatch(a.Name, "KubeNodeReady"); err != nil {
		t.Errorf("agent setting its condition on its own node: %v", err)
	}
	if err := statusPatch(a.Name, "NetworkUnavailable"); err == nil || !strings.Contains(err.Error(), "only its own KubeNodeReady condition") {
		t.Errorf("agent setting another condition: %v, want denied", err)
	}
	if err := statusPatch(b.Name, "KubeNodeReady"); err == nil || !strings.Contains(err.Error(), "may not change node policy-b") {
		t.Errorf("agent setting its condition on another node: %v, want denied", err)
	}
	addr := `{"status":{"addresses":[{"type":"InternalIP","address":"10.213.9.9"}]}}`
	if _, err := agent.CoreV1().Nodes().Patch(ctx, a.Name, types.StrategicMergePatchType, []byte(addr), metav1.PatchOptions{}, "status"); err == nil {
		t.Error("agent changing its node's addresses: allowed, want denied")
	}
}

// mustPatch is a JSON patch of ops.
func mustPatch(t *testing.T, ops ...jsonpatch.Op) string {
	t.Helper()
	p, err := jsonpatch.Marshal(ops...)
	if err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// TestManifestsMatchChart fails when manifests/ drifts from the chart: every
// file `make manifests` writes (the kustomize base, components, overlays,
// uninstall and kube-node-ready.yaml) is what it would write now, and no
// other file sits among them. test/e2e/kustomize checks what they build.
func TestManifestsMatchChart(t *testing.T) {
	want, err := manifestgen.Generate(t.Context(), filepath.Join(cp.BinDir, "helm"), chart)
	if err != nil {
		t.Fatal(err)
	}
	got, err := manifestgen.Read(filepath.Join(root, "manifests"))
	if err != nil {
		t.Fatalf("%v (run `make manifests`)", err)
	}
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("manifests/%s is missing; run `make manifests`", name)
		case !bytes.Equal(g, w):
			t.Errorf("manifests/%s differs from the chart; run `make manifests`", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("manifests/%s is not generated from the chart; run `make manifests` (it removes it)", name)
		}
	}
}

// playHookJobs stands in for the job controller and the kubelet, which the
// harness does not run: each Job helm creates in ns is run as its
// container would run — the real webhook binary with the Job's args, under a
// token of the Job's ServiceAccount — and then marked complete, so helm's
// wait for the hook returns. It stops when ctx ends and reports the Jobs run.
func playHookJobs(ctx context.Context, t *testing.T, runner harness.Node, ns string) <-chan []string {
	ran := make(chan []string, 1)
	go func() {
		var names []string
		defer func() { ran <- names }()
		seen := map[string]bool{}
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond) // pacing: the stand-in kubelet looks for new Jobs 5 times a second
			jobs, err := cp.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, job := range jobs.Items {
				// A Job completed before (the plain removal Job stays until its
				// TTL, which no controller runs here) is not run again.
				if seen[string(job.UID)] || job.Status.Succeeded > 0 {
					continue
				}
				seen[string(job.UID)] = true
				spec := job.Spec.Template.Spec
				token, err := cp.NodeToken(ctx, ns, spec.ServiceAccountName, runner.Name)
				if err != nil {
					t.Errorf("token for hook job %s: %v", job.Name, err)
					continue
				}
				kubeconfig, err := cp.WriteKubeconfig("hook-"+job.Name, spec.ServiceAccountName, token)
				if err != nil {
					t.Errorf("kubeconfig for hook job %s: %v", job.Name, err)
					continue
				}
				args := append(append([]string(nil), spec.Containers[0].Args...), "--kubeconfig="+kubeconfig)
				out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "kube-node-ready-webhook"), args...).CombinedOutput()
				if err != nil {
					t.Errorf("hook job %s (%v): %v\n%s", job.Name, args, err, out)
					continue
				}
				now := metav1.Now()
				job.Status.StartTime = &now
				job.Status.CompletionTime = &now
				job.Status.Succeeded = 1
				job.Status.Conditions = []batchv1.JobCondition{
					{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
				}
				if _, err := cp.Client.BatchV1().Jobs(ns).UpdateStatus(ctx, &job, metav1.UpdateOptions{}); err != nil {
					t.Errorf("mark hook job %s complete: %v", job.Name, err)
					continue
				}
				names = append(names, job.Name)
			}
		}
	}()
	return ran
}

func nodesWithFinalizer(t *testing.T) []string {
	t.Helper()
	list, err := cp.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		if slices.Contains(n.Finalizers, finalizer) {
			out = append(out, n.Name)
		}
	}
	return out
}

// uninstallStripsFinalizers creates nodes carrying the finalizer, runs helm
// uninstall while playing its hook Job, and checks nothing is stranded.
func uninstallStripsFinalizers(t *testing.T, prefix string) {
	t.Helper()
	ctx := t.Context()
	for i := range 3 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Finalizers: []string{finalizer, "example.com/keep"}}}
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	jobs := helmWithHooks(t, namespace, "uninstall", release, "-n", namespace, "--timeout", "60s")
	if len(jobs) != 1 {
		t.Errorf("hook jobs run: %v, want the uninstall job once", jobs)
	}
	if left := nodesWithFinalizer(t); len(left) != 0 {
		t.Errorf("nodes still carrying %s after uninstall: %v", finalizer, left)
	}
	for i := range 3 {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, fmt.Sprintf("%s-%d", prefix, i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(n.Finalizers, []string{"example.com/keep"}) {
			t.Errorf("node %s finalizers = %v, want only the foreign one kept", n.Name, n.Finalizers)
		}
	}
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "knr-kube-node-ready-webhook", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("webhook configuration after uninstall: %v, want NotFound", err)
	}
}

func TestUninstallLeavesNoFinalizer(t *testing.T) {
	if out, err := helm(t, "install", release, chart, "-n", namespace, "--create-namespace"); err != nil && !strings.Contains(out, "cannot re-use a name") {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	uninstallStripsFinalizers(t, "uninstall")
}

// TestUninstallOfHalfInstalledRelease: an install that failed half-way (the
// API server refused the webhook Deployment, after other objects were
// created) still strips finalizers on uninstall.
func TestUninstallOfHalfInstalledRelease(t *testing.T) {
	ctx := t.Context()
	admission := cp.Client.AdmissionregistrationV1()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-deployments"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "deployments refused by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-deployments"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
			},
		},
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.AppsV1().Deployments(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("policy never took effect: %v", err)
	}
	out, err := helm(t, "install", release, chart, "-n", namespace)
	if err == nil {
		t.Fatalf("helm install succeeded despite the policy; the test needs a half-installed release:\n%s", out)
	}
	if st, _ := helm(t, "status", release, "-n", namespace); !strings.Contains(st, "STATUS: failed") {
		t.Fatalf("release is not in failed state after %s\n%s", out, st)
	}
	uninstallStripsFinalizers(t, "half")
}

// TestEveryValueDocumented: each value in values.yaml (or, for a map, each
// of its entries) is in the table of the chart's README.
func TestEveryValueDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := prefix + k
			if strings.Contains(string(readme), "`"+path+"`") {
				continue
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(path+".", sub)
				continue
			}
			t.Errorf("value %s is not documented in charts/kube-node-ready/README.md", path)
		}
	}
	walk("", values)
}

// TestCleanupConfigParsesAndGrantsPluginRBAC renders the cleanup ConfigMap
// with every plugin and checks the webhook's own parser accepts it, and that
// the ClusterRole grants exactly the enabled plugins' permissions.
func TestCleanupConfigParsesAndGrantsPluginRBAC(t *testing.T) {
	plugins := `{"volumeattachments":{"critical":true,"timeout":"2m"},` +
		`"local-volumes":{"after":["volumeattachments"],"storageClasses":["local-storage"]},` +
		`"portworx":{"after":["local-volumes"],"endpoint":"http://portworx-api.kube-system:9001","tokenFile":"/etc/kube-node-ready/secrets/portworx-token"},` +
		`"notify":{"critical":false,"urlFile":"/etc/kube-node-ready/secrets/notify-url","format":"slack"},"log":{}}`
	render := func(show string, extra ...string) string {
		args := append([]string{"template", release, chart, "-n", namespace, "--kube-version", "1.36.0", "--show-only", show}, extra...)
		out, err := helm(t, args...)
		if err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
		return out
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal([]byte(render("templates/webhook-configmap.yaml", "--set-json", "webhook.cleanup.plugins="+plugins)), &cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := cleanup.ParseConfig([]byte(cm.Data["config.yaml"]), cleanupplugins.Builtins())
	if err != nil {
		t.Fatalf("the webhook rejects the chart's config.yaml: %v\n%s", err, cm.Data["config.yaml"])
	}
	if !cfg.Plugins["portworx"].Enabled || !cfg.Plugins["volumeattachments"].Critical {
		t.Errorf("parsed config lost settings: %+v", cfg.Plugins)
	}

	rules := func(extra ...string) string {
		docs := strings.Split(render("templates/webhook-rbac.yaml", extra...), "\n---")
		for _, d := range docs {
			if strings.Contains(d, "kind: ClusterRole\n") {
				return d
			}
		}
		t.Fatal("no ClusterRole rendered")
		return ""
	}
	all := rules("--set-json", "webhook.cleanup.plugins="+plugins)
	only := rules()
	for _, want := range []string{"volumeattachments", "persistentvolumes", "persistentvolumeclaims", "storageclasses"} {
		if !strings.Contains(all, want) {
			t.Errorf("ClusterRole with every plugin lacks %s", want)
		}
		if strings.Contains(only, want) {
			t.Errorf("ClusterRole with only the log plugin grants %s", want)
		}
	}
	disabled := rules("--set-json", `webhook.cleanup.plugins={"volumeattachments":{"enabled":false}}`)
	if strings.Contains(disabled, "volumeattachments") {
		t.Error("a disabled plugin still gets RBAC")
	}
	// Listed with no settings is enabled, as the cleanup configuration reads it.
	bare := rules("--set-json", `webhook.cleanup.plugins={"volumeattachments":{},"local-volumes":{}}`)
	for _, want := range []string{"volumeattachments", "persistentvolumes", "storageclasses"} {
		if !strings.Contains(bare, want) {
			t.Errorf("ClusterRole for plugins listed as {} lacks %s", want)
		}
	}
}
