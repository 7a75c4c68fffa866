//go:build e2e

package kubectlplugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	doctorRelease   = "doctor"
	doctorNamespace = "knr-doctor"
)

// doctorCA is a Cluster Autoscaler Deployment as its chart writes one: the
// program and its flags in command. It never runs (no replicas): doctor
// reads only its flags.
const doctorCA = `apiVersion: apps/v1
kind: Deployment
metadata: {name: doctor-cluster-autoscaler, namespace: kube-system}
spec:
  replicas: 0
  selector: {matchLabels: {app: doctor-cluster-autoscaler}}
  template:
    metadata: {labels: {app: doctor-cluster-autoscaler}}
    spec:
      containers:
        - name: cluster-autoscaler
          image: registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.0
          command: [./cluster-autoscaler, --cloud-provider=clusterapi, --v=4, --scale-down-unready-time=20m]
`

// doctorNodePools are Karpenter NodePools (its real CRD): one without our
// taint, one with it among its permanent taints.
const doctorNodePools = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: doctor-default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: []
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: doctor-gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: []
      taints:
        - {key: nvidia.com/gpu, effect: NoSchedule}
        - {key: node-ready/unverified, value: "true", effect: NoSchedule}
`

// TestDoctor: with the chart installed by helm (the seed keys, remediation
// after the default 30m), a Cluster Autoscaler Deployment without taint
// flags and two NodePools that get our key wrong, the real kubectl runs
// doctor, which names every problem and exits 1; applying the kubectl
// patches it printed, as printed, leaves nothing wrong: exit 0. A person
// RBAC does not let read the NodePools gets exit 3 naming that read. After
// helm changes the startup key, doctor reads the new one as deployed.
func TestDoctor(t *testing.T) {
	chart, err := harness.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	cp.HelmT(t, "install", doctorRelease, chart, "--namespace", doctorNamespace, "--create-namespace",
		// No webhook configuration (nothing serves it here) and no backfill
		// (it needs cleanup); remediation on, so the webhook has a deadline.
		"--set", "webhook.cleanup.enabled=false", "--set", "webhook.backfill=false", "--set", "webhook.remediation.policy=replace",
		// The seed keys, which Cluster Autoscaler and Karpenter do not know
		// unless told: the wrong setup doctor is to find.
		"--set", "autoscaler=none")
	t.Cleanup(func() {
		// The pre-delete hook's Job would never run here: nothing runs pods.
		_, _ = cp.Helm(context.Background(), "uninstall", doctorRelease, "--namespace", doctorNamespace, "--no-hooks")
	})
	cp.KubectlOK(t, doctorCA, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = cp.Kubectl(context.Background(), nil, "delete", "deployment", "doctor-cluster-autoscaler", "-n", "kube-system", "--ignore-not-found")
	})
	if err := cp.InstallCRDs(t.Context(), "karpenter", "karpenter.sh_nodepools.yaml"); err != nil {
		t.Fatal(err)
	}
	cp.KubectlOK(t, doctorNodePools, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = cp.Kubectl(context.Background(), nil, "delete", "nodepool", "doctor-default", "doctor-gpu", "--ignore-not-found")
	})

	wrong := doctorSays(t, "of the wrong setup", kubectlplugin.ExitError,
		"kube-node-ready:    DaemonSet knr-doctor/doctor-kube-node-ready (Helm release doctor)",
		"problem: Cluster Autoscaler Deployment kube-system/doctor-cluster-autoscaler, startup taint node-ready/unverified: over-scale, template poisoning",
		"problem: Cluster Autoscaler Deployment kube-system/doctor-cluster-autoscaler, unhealthy taint node-ready/unhealthy: template poisoning, capacity not replaced",
		"problem: Cluster Autoscaler Deployment kube-system/doctor-cluster-autoscaler, startup taint node-ready/unverified: held past Cluster Autoscaler's deadline",
		"problem: Karpenter nodepool/doctor-default, startup taint node-ready/unverified: runaway launches",
		"problem: Karpenter nodepool/doctor-gpu, startup taint node-ready/unverified: declared permanent",
		"or:  use the chart's cluster-autoscaler preset: helm upgrade doctor oci://ghcr.io/kube-node-ready/charts/kube-node-ready --version "+chartVersion(t)+" --namespace knr-doctor --reset-then-reuse-values --set autoscaler=cluster-autoscaler --set agent.startupTaint.key= --set agent.retaintTaint.key=")
	if !strings.Contains(wrong.stderr, "doctor: 5 problems found") {
		t.Errorf("doctor of the wrong setup: %s; want 5 problems", wrong)
	}

	// The same as JSON; its fixes are applied as printed, with the real kubectl.
	r := kubectl(t, "", nil, "node-ready", "doctor", "-n", doctorNamespace, "-o", "json")
	var report doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || r.code != kubectlplugin.ExitError {
		t.Fatalf("doctor -o json: %v\n%s", err, r)
	}
	if report.Problems != 5 || len(report.Installs) != 1 || report.Installs[0].Webhook != "Deployment knr-doctor/doctor-kube-node-ready-webhook" ||
		report.Installs[0].UnverifiedDeadline != "30m" || !report.Karpenter.Installed {
		t.Fatalf("doctor -o json: %+v", report)
	}
	for _, f := range report.Installs[0].Findings {
		cp.KubectlOK(t, "", patchCommand(t, f)...)
	}

	doctorSays(t, "after the fixes", kubectlplugin.ExitOK, "No problems: every autoscaler present treats our taints as it should.")
	args := cp.KubectlOK(t, "", "get", "deployment", "doctor-cluster-autoscaler", "-n", "kube-system", "-o", "jsonpath={.spec.template.spec.containers[0].command}")
	for _, flag := range []string{"--startup-taint=node-ready/unverified", "--status-taint=node-ready/unhealthy", "--max-node-startup-time=35m"} {
		if !strings.Contains(args, flag) {
			t.Errorf("Cluster Autoscaler's command after the fixes lacks %s: %s", flag, args)
		}
	}
	gpu := cp.KubectlOK(t, "", "get", "nodepool", "doctor-gpu", "-o", "jsonpath={.spec.template.spec.taints[*].key} / {.spec.template.spec.startupTaints[*].key}")
	if gpu != "nvidia.com/gpu / node-ready/unverified" {
		t.Errorf("doctor-gpu's taints / startupTaints after the fix: %q", gpu)
	}

	// Someone who may read Deployments, DaemonSets and nodes but not NodePools.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "doctor-no-nodepools"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments", "daemonsets", "controllerrevisions"}, Verbs: []string{"list"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "doctor-no-nodepools"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "doctor-reader"}}}
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	harness.WaitFor(t, 10*time.Second, "RBAC to let doctor-reader list deployments", func() bool {
		out, _ := cp.Kubectl(t.Context(), nil, "auth", "can-i", "list", "deployments", "--as=doctor-reader", "-A")
		return strings.TrimSpace(out) == "yes"
	})
	denied := kubectl(t, "", nil, "node-ready", "doctor", "--as=doctor-reader")
	if denied.code != kubectlplugin.ExitIncomplete ||
		!strings.Contains(denied.stderr, `doctor: could not read what it needs: not allowed to list nodepools.karpenter.sh: nodepools.karpenter.sh is forbidden: User "doctor-reader" cannot list resource "nodepools"`) ||
		!strings.Contains(denied.stdout, "Cluster Autoscaler:  Deployment kube-system/doctor-cluster-autoscaler") {
		t.Errorf("doctor without NodePool access: %s; want exit 3 naming the NodePool read", denied)
	}

	// The chart's startup key changes (as switching presets does): doctor
	// reads the new key from the DaemonSet and the webhook as deployed; the
	// NodePools still declaring the old key is advice, Cluster Autoscaler not
	// knowing the new one a problem.
	cp.HelmT(t, "upgrade", doctorRelease, chart, "--namespace", doctorNamespace, "--reuse-values",
		"--set", "agent.startupTaint.key=readiness.k8s.io/node-ready")
	moved := doctorSays(t, "after the key changed", kubectlplugin.ExitError,
		"startup taint:    readiness.k8s.io/node-ready=true:NoSchedule",
		"problem: Cluster Autoscaler Deployment kube-system/doctor-cluster-autoscaler, startup taint readiness.k8s.io/node-ready: over-scale, template poisoning",
		"advice: Karpenter nodepool/doctor-default, startup taint readiness.k8s.io/node-ready: previous key declared",
		"advice: Karpenter nodepool/doctor-gpu, startup taint readiness.k8s.io/node-ready: previous key declared")
	if strings.Contains(moved.stderr, "warning:") {
		t.Errorf("doctor after the key changed warns: %s; the webhook watches the new key too", moved)
	}

	// Its preset fix, run as printed with the real helm, takes the
	// installation to the preset's keys although a key was set explicitly
	// (an explicit key wins over the preset, so the fix clears it).
	cp.HelmT(t, printedHelm(t, moved.stdout, "use the chart's cluster-autoscaler preset: ", chart)...)
	doctorSays(t, "after the preset fix", kubectlplugin.ExitOK,
		"startup taint:    startup-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule",
		"unhealthy taint:  status-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule")
}

// printedHelm is the helm command doctor printed after prefix in out, as
// helm's arguments, with chart in place of the published chart and its
// --version (nothing is published where the test runs): the rest runs as
// printed. A word in single quotes loses them, as a shell reads it.
func printedHelm(t *testing.T, out, prefix, chart string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(out, prefix+"helm ")
	if !ok {
		t.Fatalf("doctor printed no %q fix:\n%s", prefix, out)
	}
	line, _, _ := strings.Cut(rest, "\n")
	words := strings.Fields(line)
	var args []string
	for i := 0; i < len(words); i++ {
		switch a := words[i]; {
		case a == doctor.PublishedChart:
			args = append(args, chart)
			if i+2 < len(words) && words[i+1] == "--version" {
				i += 2
			}
		default:
			args = append(args, strings.TrimSuffix(strings.TrimPrefix(a, "'"), "'"))
		}
	}
	return args
}

// chartVersion is the version of the working tree's chart, which doctor
// reads back from the labels helm puts on the workloads.
func chartVersion(t *testing.T) string {
	t.Helper()
	chart, err := harness.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "version: "); ok {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	t.Fatalf("no version in %s/Chart.yaml", chart)
	return ""
}

// doctorSays runs `kubectl node-ready doctor -n <the release's namespace>`
// and fails the test unless it exits with code and prints every one of wants.
func doctorSays(t *testing.T, what string, code int, wants ...string) result {
	t.Helper()
	r := kubectl(t, "", nil, "node-ready", "doctor", "-n", doctorNamespace)
	if r.code != code {
		t.Fatalf("doctor %s: %s; want exit %d", what, r, code)
	}
	for _, want := range wants {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor %s lacks %q:\n%s", what, want, r.stdout)
		}
	}
	return r
}

// patchCommand is the kubectl command of the first fix of f that is a
// `kubectl patch`, as kubectl's arguments: the words before -p, then the
// patch between its single quotes.
func patchCommand(t *testing.T, f doctor.Finding) []string {
	t.Helper()
	i := slices.IndexFunc(f.Fixes, func(s string) bool { return strings.Contains(s, "kubectl patch ") })
	if i < 0 {
		t.Fatalf("finding %q has no kubectl patch among its fixes %q", f.Summary, f.Fixes)
	}
	fix := f.Fixes[i]
	cmd := fix[strings.Index(fix, "kubectl patch ")+len("kubectl "):]
	words, patch, ok := strings.Cut(cmd, " -p '")
	if !ok || !strings.HasSuffix(patch, "'") {
		t.Fatalf("fix %q: want kubectl patch ... -p '<patch>'", fix)
	}
	return append(strings.Fields(words), "-p", strings.TrimSuffix(patch, "'"))
}
