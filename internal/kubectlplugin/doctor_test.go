package kubectlplugin

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/app"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	webhookapp "github.com/kube-node-ready/kube-node-ready/internal/webhook/app"
)

func (f *fakeAPI) forbidden(resource, namespace string) error {
	key := namespace
	if key == "" {
		key = "*"
	}
	if !f.forbid["list "+resource+" "+key] {
		return nil
	}
	group, res, _ := strings.Cut(resource, ".")
	return explain(apierrors.NewForbidden(schema.GroupResource{Group: res, Resource: group}, "", errors.New("RBAC says no")), "list", resource+scope(namespace), "")
}

func (f *fakeAPI) ListDaemonSets(_ context.Context, namespace string) ([]appsv1.DaemonSet, error) {
	if err := f.forbidden("daemonsets.apps", namespace); err != nil {
		return nil, err
	}
	var out []appsv1.DaemonSet
	for _, d := range f.daemonSets {
		if namespace == "" || d.Namespace == namespace {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeAPI) ListDeployments(_ context.Context, namespace string) ([]appsv1.Deployment, error) {
	if err := f.forbidden("deployments.apps", namespace); err != nil {
		return nil, err
	}
	var out []appsv1.Deployment
	for _, d := range f.deployments {
		if namespace == "" || d.Namespace == namespace {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeAPI) ListControllerRevisions(_ context.Context, namespace string) ([]appsv1.ControllerRevision, error) {
	if err := f.forbidden("controllerrevisions.apps", namespace); err != nil {
		return nil, err
	}
	var out []appsv1.ControllerRevision
	for _, r := range f.revisions {
		if r.Namespace == namespace {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeAPI) ListNodePools(context.Context) ([]doctor.NodePool, bool, error) {
	if !f.karpenter {
		return nil, false, nil
	}
	if f.forbid["list nodepools.karpenter.sh"] {
		return nil, true, explain(apierrors.NewForbidden(schema.GroupResource{Group: "karpenter.sh", Resource: "nodepools"}, "", errors.New("RBAC says no")), "list", "nodepools.karpenter.sh", "")
	}
	return f.nodePools, true, nil
}

const knrNS = "kube-node-ready"

// chartLabels are the labels the chart puts on its workloads.
var chartLabels = map[string]string{"app.kubernetes.io/name": "kube-node-ready", "app.kubernetes.io/instance": "kube-node-ready", "app.kubernetes.io/managed-by": "Helm",
	"helm.sh/chart": "kube-node-ready-0.1.0", "app.kubernetes.io/version": "0.1.0"}

// agentDS is the chart's agent DaemonSet with the taint flags given.
func agentDS(startup, unhealthy string) appsv1.DaemonSet {
	return appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: knrNS, Name: "kube-node-ready", Labels: chartLabels},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": agentApp}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "ghcr.io/kube-node-ready/kube-node-ready-agent:v1",
				Args: []string{"--startup-taint=" + startup, "--unhealthy-taint=" + unhealthy, "--verified-label=node-ready/verified"}}}},
		}},
	}
}

// webhookDep is the chart's webhook Deployment with args.
func webhookDep(args ...string) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: knrNS, Name: "kube-node-ready-webhook", Labels: chartLabels},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": webhookApp}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "webhook", Image: "ghcr.io/kube-node-ready/kube-node-ready-webhook:v1",
				Args: append([]string{"--listen-address=:8443"}, args...)}}},
		}},
		// Running: it removes the finalizer (doctor's held finalizers).
		Status: appsv1.DeploymentStatus{ReadyReplicas: 1},
	}
}

// caDep is a Cluster Autoscaler Deployment as its chart writes it: the
// program and its flags in command.
func caDep(flags ...string) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "aws-cluster-autoscaler", Image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.0",
				Command: append([]string{"./cluster-autoscaler", "--cloud-provider=aws", "--v=4"}, flags...)}}},
		}},
	}
}

var (
	caStartup   = "startup-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule"
	caStatus    = "status-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule"
	readiness   = "readiness.k8s.io/node-ready=true:NoSchedule"
	seedStartup = doctor.Taint{Key: api.StartupTaintKey, Value: "true", Effect: "NoSchedule"}
)

// doctorFake is a cluster for doctor: our agent and webhook, then what
// the case adds.
func doctorFake(startup, unhealthy string, webhookArgs []string, deps ...appsv1.Deployment) *fakeAPI {
	f := newFake()
	f.daemonSets = []appsv1.DaemonSet{agentDS(startup, unhealthy)}
	f.deployments = append([]appsv1.Deployment{webhookDep(webhookArgs...)}, deps...)
	return f
}

func TestGoldenDoctor(t *testing.T) {
	for _, tt := range []struct {
		file     string
		fake     *fakeAPI
		args     []string
		wantCode int
	}{
		{"doctor-ca-no-flags.txt", doctorFake(api.StartupTaint, api.UnhealthyTaint, nil, caDep()), nil, ExitError},
		{"doctor-ca-managed.txt", doctorFake(api.StartupTaint, api.UnhealthyTaint, nil), nil, ExitOK},
		{"doctor-ca-startup-taint.txt", doctorFake(api.StartupTaint, api.UnhealthyTaint, []string{"--remediation=replace", "--unverified-deadline=30m"},
			caDep("--startup-taint=node-ready/unverified")), nil, ExitError},
		{"doctor-karpenter-missing.txt", func() *fakeAPI {
			f := doctorFake(api.StartupTaint, api.UnhealthyTaint, nil)
			f.karpenter = true
			f.nodePools = []doctor.NodePool{{Name: "default"}, {Name: "gpu", Taints: []doctor.Taint{{Key: "nvidia.com/gpu", Effect: "NoSchedule"}}}}
			return f
		}(), nil, ExitError},
		{"doctor-karpenter-readiness.txt", func() *fakeAPI {
			f := doctorFake(readiness, caStatus, nil, karpenterDep("public.ecr.aws/karpenter/controller:1.14.1"+ecrDigest, karpenterLabels("1.14.1")))
			f.karpenter = true
			r, _ := doctor.ParseTaint(readiness)
			f.nodePools = []doctor.NodePool{{Name: "default", StartupTaints: []doctor.Taint{r}}, {Name: "legacy", StartupTaints: []doctor.Taint{seedStartup}}}
			return f
		}(), nil, ExitOK},
		{"doctor-karpenter-v1.12.txt", func() *fakeAPI {
			f := doctorFake(readiness, caStatus, nil, karpenterDep("public.ecr.aws/karpenter/controller:1.12.1"+ecrDigest, karpenterLabels("1.12.1")))
			f.karpenter = true
			f.nodePools = []doctor.NodePool{{Name: "default"}}
			return f
		}(), nil, ExitError},
		{"doctor-both.txt", func() *fakeAPI {
			f := doctorFake(caStartup, caStatus, nil, caDep("--max-node-provision-time=10m"))
			f.karpenter = true
			f.nodePools = []doctor.NodePool{{Name: "default"}}
			return f
		}(), nil, ExitError},
		{"doctor-clean.txt", func() *fakeAPI {
			f := doctorFake(caStartup, caStatus, []string{"--remediation=replace", "--unverified-deadline=14m"}, caDep())
			f.karpenter = true
			s, _ := doctor.ParseTaint(caStartup)
			f.nodePools = []doctor.NodePool{{Name: "default", StartupTaints: []doctor.Taint{s}}}
			return f
		}(), nil, ExitOK},
		{"doctor-both.json", func() *fakeAPI {
			f := doctorFake(caStartup, caStatus, nil, caDep("--max-node-provision-time=10m"))
			f.karpenter = true
			f.nodePools = []doctor.NodePool{{Name: "default"}}
			return f
		}(), []string{"-o", "json"}, ExitError},
	} {
		t.Run(tt.file, func(t *testing.T) {
			code, out, errOut, _ := run(tt.fake, "", append([]string{"doctor"}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.wantCode, errOut)
			}
			if code == ExitError && !strings.Contains(errOut, "found: see the fixes above") {
				t.Errorf("stderr %q does not say problems were found", errOut)
			}
			golden(t, tt.file, []byte(out))
		})
	}
}

// TestDoctorReadFailures: a read RBAC refuses is named and makes the exit
// status 3 when nothing else is wrong; listing in all namespaces falls
// back to the kubeconfig's namespace for our workloads and to kube-system
// for Cluster Autoscaler, with a warning.
func TestDoctorReadFailures(t *testing.T) {
	clean := func() *fakeAPI {
		return doctorFake(caStartup, caStatus, nil, caDep())
	}
	f := clean()
	f.karpenter = true
	f.forbid["list nodepools.karpenter.sh"] = true
	code, out, errOut, _ := run(f, "", "doctor")
	if code != ExitIncomplete || !strings.Contains(errOut, "could not read what it needs: not allowed to list nodepools.karpenter.sh") ||
		!strings.Contains(out, "Not read (the verdict is incomplete):\n  - not allowed to list nodepools.karpenter.sh") {
		t.Errorf("nodepools forbidden: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	f = clean()
	f.forbid["list deployments.apps *"] = true
	f.forbid["list daemonsets.apps *"] = true
	code, out, errOut, _ = run(f, "", "-n", knrNS, "doctor")
	if code != ExitOK || !strings.Contains(errOut, "warning: not allowed to list deployments.apps in all namespaces") ||
		strings.Contains(errOut, "daemonsets") || !strings.Contains(out, "Deployment kube-system/cluster-autoscaler") {
		t.Errorf("-n with deployments forbidden cluster-wide: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "looked for Cluster Autoscaler in namespace kube-system only") {
		t.Errorf("no warning about the kube-system fallback: %s", errOut)
	}

	f = clean()
	f.daemonSets = nil
	code, out, errOut, _ = run(f, "", "doctor")
	if code != ExitIncomplete || !strings.Contains(errOut, "no kube-node-ready agent DaemonSet (pod label app=kube-node-ready) in all namespaces") ||
		!strings.Contains(out, "none found: the chart's default keys assumed") {
		t.Errorf("no agent: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	f = clean()
	f.daemonSets[0].Namespace = "elsewhere"
	if code, _, errOut, _ = run(f, "", "-n", knrNS, "doctor"); code != ExitIncomplete || !strings.Contains(errOut, "in namespace kube-node-ready: pass --namespace") {
		t.Errorf("-n of another namespace: exit %d, stderr %s", code, errOut)
	}
}

// TestDoctorReadsEnvironmentTwins: the agent's keys and the webhook's
// deadline set by KNR_* variables (the old --retaint-taint's among them)
// are read like the flags, and a flag wins over its twin.
func TestDoctorReadsEnvironmentTwins(t *testing.T) {
	ds := agentDS(caStartup, caStatus)
	c := &ds.Spec.Template.Spec.Containers[0]
	c.Args = []string{"--unhealthy-taint=" + caStatus}
	c.Env = []corev1.EnvVar{{Name: "KNR_AGENT_STARTUP_TAINT", Value: caStartup}, {Name: "KNR_AGENT_UNHEALTHY_TAINT", Value: api.UnhealthyTaint}}
	in, warnings := readAgent(&ds)
	if in.Startup.String() != caStartup || in.Unhealthy.String() != caStatus || len(warnings) > 0 {
		t.Errorf("agent: %+v %v; want the startup taint from the environment and the unhealthy one from the flag", in, warnings)
	}
	c.Args = nil
	c.Env = []corev1.EnvVar{{Name: "KNR_AGENT_RETAINT_TAINT", Value: caStatus},
		{Name: "KNR_AGENT_STARTUP_TAINT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}}
	in, warnings = readAgent(&ds)
	if in.Unhealthy.String() != caStatus || in.Startup.String() != api.Default().StartupTaint() || len(warnings) != 1 || !strings.Contains(warnings[0], "KNR_AGENT_STARTUP_TAINT") {
		t.Errorf("agent: %+v %v; want the old twin read and the ConfigMap-set one warned about", in, warnings)
	}
	d := webhookDep()
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KNR_WEBHOOK_REMEDIATION", Value: "report"}, {Name: "KNR_WEBHOOK_UNVERIFIED_DEADLINE", Value: "20m"}}
	if keys, warnings := readWebhook(&in, &d); in.Remediation != "report" || in.UnverifiedDeadline.String() != "20m0s" || len(warnings) > 0 || keys.set {
		t.Errorf("webhook: %+v %+v %v", in, keys, warnings)
	}
}

// TestDoctorWebhookKeys: a webhook watching other keys than its agent
// writes is warned about; a webhook without an agent gives the keys it
// watches.
func TestDoctorWebhookKeys(t *testing.T) {
	f := doctorFake(caStartup, caStatus, []string{"--remediation=replace", "--unverified-deadline=10m", "--agent-startup-taint=" + api.StartupTaint, "--agent-unhealthy-taint=" + caStatus}, caDep())
	code, _, errOut, _ := run(f, "", "doctor")
	if code != ExitOK || !strings.Contains(errOut, "warning: Deployment kube-node-ready/kube-node-ready-webhook watches --agent-startup-taint=node-ready/unverified=true:NoSchedule") ||
		!strings.Contains(errOut, "remediation does not see the nodes the agent holds") {
		t.Errorf("mismatched keys: exit %d, stderr %s", code, errOut)
	}
	f.daemonSets = nil
	code, out, errOut, _ := run(f, "", "doctor")
	if code != ExitError || !strings.Contains(out, "kube-node-ready:    no agent DaemonSet found: keys from the webhook's flags (Helm release kube-node-ready)") ||
		!strings.Contains(out, "problem: Cluster Autoscaler Deployment kube-system/cluster-autoscaler, startup taint node-ready/unverified: over-scale") {
		t.Errorf("webhook without an agent: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestDoctorNamesAreTheBinaries': what doctor reads the binaries by is
// what they use.
func TestDoctorNamesAreTheBinaries(t *testing.T) {
	a, w := app.NewOptions(), webhookapp.NewOptions()
	for _, tt := range []struct{ name, got, want string }{
		{"agent env prefix", api.AgentEnvPrefix, app.EnvPrefix},
		{"webhook env prefix", api.WebhookEnvPrefix, webhookapp.EnvPrefix},
		{"agent preset", api.DefaultPreset, a.Autoscaler},
		{"agent startup taint", "", a.StartupTaint},
		{"agent unhealthy taint", "", a.UnhealthyTaint},
		{"webhook preset", api.DefaultPreset, w.Autoscaler},
		{"webhook agent startup taint", "", w.StartupTaint},
		{"webhook agent unhealthy taint", "", w.UnhealthyTaint},
		{"webhook remediation", "off", w.Remediation},
		{"webhook deadline", api.DefaultUnverifiedDeadline(api.DefaultPreset).String(), w.Deadline().String()},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: doctor has %q, the binary %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestDoctorReadsFlagsTheBinariesHave: every flag doctor reads back from
// a deployed agent or webhook is one the binary registers.
func TestDoctorReadsFlagsTheBinariesHave(t *testing.T) {
	agentFlags, webhookFlags := flag.NewFlagSet("agent", flag.ContinueOnError), flag.NewFlagSet("webhook", flag.ContinueOnError)
	app.NewOptions().AddFlags(agentFlags)
	webhookapp.NewOptions().AddFlags(webhookFlags)
	for _, tt := range []struct {
		fs    *flag.FlagSet
		names []string
	}{
		{agentFlags, []string{api.AutoscalerFlag, api.PreviousTaintKeysFlag, api.SuspendConfigMapFlag, api.StartupTaintFlag, api.UnhealthyTaintFlag,
			api.SkipVerificationAnnotationFlag, api.ExternalNamesFlag, api.ModeFlag, api.ReverifyAfterRebootFlag}},
		{webhookFlags, []string{api.AutoscalerFlag, api.PreviousTaintKeysFlag, api.SuspendConfigMapFlag, api.AgentStartupTaintFlag, api.AgentUnhealthyTaintFlag,
			api.FinalizerFlag, api.LegacyFinalizersFlag, api.CleanupFlag, api.RemediationFlag, api.UnverifiedDeadlineFlag, api.InjectStartupTaintFlag,
			api.KarpenterReadinessKeysFlag, api.SkipCleanupAnnotationFlag, api.ExternalNamesFlag}},
	} {
		for _, n := range tt.names {
			if tt.fs.Lookup(n) == nil {
				t.Errorf("doctor reads --%s of the %s, which has no such flag", n, tt.fs.Name())
			}
		}
	}
}

func TestIsClusterAutoscaler(t *testing.T) {
	for _, tt := range []struct {
		c    corev1.Container
		want bool
	}{
		{corev1.Container{Image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.0"}, true},
		{corev1.Container{Image: "registry.k8s.io/autoscaling/cluster-autoscaler-arm64@sha256:abc"}, true},
		{corev1.Container{Image: "example.com/mirror/ca:1", Command: []string{"/usr/local/bin/cluster-autoscaler"}}, true},
		{corev1.Container{Image: "example.com/cluster-autoscaler-exporter:1"}, true},
		{corev1.Container{Image: "example.com/app:1", Args: []string{"--talks-to=cluster-autoscaler"}}, false},
		{corev1.Container{Image: "ghcr.io/kube-node-ready/kube-node-ready-webhook:v1"}, false},
	} {
		if got := isClusterAutoscaler(tt.c); got != tt.want {
			t.Errorf("isClusterAutoscaler(%+v) = %t", tt.c, got)
		}
	}
}

// TestIsOurs: our workloads are found by the chart's pod label, or
// by the image name when manifests renamed the label.
func TestIsOurs(t *testing.T) {
	ds := agentDS(api.StartupTaint, api.UnhealthyTaint)
	relabelled := ds.DeepCopy()
	relabelled.Spec.Template.Labels = map[string]string{"app": "node-checker"}
	other := relabelled.DeepCopy()
	other.Spec.Template.Spec.Containers[0].Image = "example.com/node-checker:1"
	for _, tt := range []struct {
		name string
		t    corev1.PodTemplateSpec
		app  string
		want bool
	}{
		{"agent by label", ds.Spec.Template, agentApp, true},
		{"agent by image", relabelled.Spec.Template, agentApp, true},
		{"another DaemonSet", other.Spec.Template, agentApp, false},
		{"the agent is not the webhook", ds.Spec.Template, webhookApp, false},
		{"webhook by label", webhookDep().Spec.Template, webhookApp, true},
	} {
		if got := isOurs(tt.t, tt.app); got != tt.want {
			t.Errorf("%s: isOurs = %t", tt.name, got)
		}
	}
}

// TestDoctorReadsThePreset: an agent given only --autoscaler writes that
// preset's keys, and a webhook given none remediates after the default
// preset's deadline: doctor reads them as the binaries resolve them.
func TestDoctorReadsThePreset(t *testing.T) {
	ds := agentDS(caStartup, caStatus)
	ds.Spec.Template.Spec.Containers[0].Args = []string{"--autoscaler=" + api.PresetKarpenter}
	in, warnings := readAgent(&ds)
	if in.Startup.String() != readiness || in.Unhealthy.String() != caStatus || len(warnings) > 0 {
		t.Errorf("agent with --autoscaler=karpenter: %+v %v; want the karpenter preset's keys", in, warnings)
	}
	ds.Spec.Template.Spec.Containers[0].Args = []string{"--autoscaler=cluster-autoscaler", "--startup-taint=" + api.StartupTaint}
	if in, _ = readAgent(&ds); in.Startup.String() != api.StartupTaint || in.Unhealthy.String() != caStatus {
		t.Errorf("agent with the CA preset and a startup taint: %+v; want the flag's startup taint and the preset's unhealthy one", in)
	}
	ds.Spec.Template.Spec.Containers[0].Args = []string{"--autoscaler=fargate"}
	if in, warnings = readAgent(&ds); in.Startup.String() != caStartup || len(warnings) != 1 || !strings.Contains(warnings[0], `unknown autoscaler "fargate"`) {
		t.Errorf("agent with an unknown preset: %+v %v; want the default preset's keys and a warning", in, warnings)
	}
	for preset, want := range map[string]string{"": "10m0s", api.PresetKarpenter: "30m0s"} {
		d := webhookDep("--remediation=report")
		if preset != "" {
			d = webhookDep("--remediation=report", "--autoscaler="+preset)
		}
		readWebhook(&in, &d)
		if in.UnverifiedDeadline.String() != want {
			t.Errorf("webhook with --autoscaler=%q: deadline %s, want %s", preset, in.UnverifiedDeadline, want)
		}
	}
}
