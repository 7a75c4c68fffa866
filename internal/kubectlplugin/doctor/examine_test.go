package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/app"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/golden"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
	webhookapp "github.com/kube-node-ready/kube-node-ready/internal/webhook/app"
)

// fakeAPI is a Cluster in memory; forbid names the reads RBAC refuses:
// "list <resource> <namespace, * for all>", "list nodes",
// "list nodepools.karpenter.sh", "list events <namespace>".
type fakeAPI struct {
	nodes       map[string]*corev1.Node
	events      map[string][]eventsv1.Event // by namespace
	forbid      map[string]bool
	daemonSets  []appsv1.DaemonSet
	deployments []appsv1.Deployment
	revisions   []appsv1.ControllerRevision
	// nodePools are served when karpenter is set, rules when nrc is.
	nodePools []NodePool
	karpenter bool
	rules     []ReadinessRule
	nrc       bool
}

func newFake(nodes ...corev1.Node) *fakeAPI {
	f := &fakeAPI{nodes: map[string]*corev1.Node{}, events: map[string][]eventsv1.Event{}, forbid: map[string]bool{}}
	for i := range nodes {
		f.nodes[nodes[i].Name] = &nodes[i]
	}
	return f
}

// refused is RBAC's answer to a read, in the words the plugin's API puts
// it in ("not allowed to list ...").
type refused struct{ err error }

func (r refused) Error() string { return "not allowed to " + r.err.Error() }
func (r refused) Unwrap() error { return r.err }

// forbidden is refused when f forbids listing resource (known in forbid
// as name) in namespace.
func (f *fakeAPI) forbidden(name, resource, namespace string) error {
	key, where := namespace, " in namespace "+namespace
	if namespace == "" {
		key, where = "*", " in all namespaces"
	}
	if !f.forbid["list "+name+" "+key] {
		return nil
	}
	group, res, _ := strings.Cut(resource, ".")
	return refused{fmt.Errorf("list %s%s: %w", resource, where,
		apierrors.NewForbidden(schema.GroupResource{Group: res, Resource: group}, "", errors.New("RBAC says no")))}
}

// inNamespace are the items in namespace ("" for all).
func inNamespace[T any, P interface {
	*T
	GetNamespace() string
}](items []T, namespace string) []T {
	var out []T
	for i := range items {
		if namespace == "" || P(&items[i]).GetNamespace() == namespace {
			out = append(out, items[i])
		}
	}
	return out
}

func (f *fakeAPI) ListNodes(_ context.Context, selector string) ([]corev1.Node, error) {
	if f.forbid["list nodes"] {
		return nil, refused{fmt.Errorf("list nodes: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("RBAC says no")))}
	}
	var out []corev1.Node
	for _, n := range f.nodes {
		out = append(out, *n.DeepCopy())
	}
	return out, nil
}

func (f *fakeAPI) ListPodEvents(_ context.Context, namespace string) ([]eventsv1.Event, error) {
	if err := f.forbidden("events", "events.events.k8s.io", namespace); err != nil {
		return nil, err
	}
	return f.events[namespace], nil
}

func (f *fakeAPI) ListDaemonSets(_ context.Context, namespace string) ([]appsv1.DaemonSet, error) {
	if err := f.forbidden("daemonsets.apps", "daemonsets.apps", namespace); err != nil {
		return nil, err
	}
	return inNamespace(f.daemonSets, namespace), nil
}

func (f *fakeAPI) ListDeployments(_ context.Context, namespace string) ([]appsv1.Deployment, error) {
	if err := f.forbidden("deployments.apps", "deployments.apps", namespace); err != nil {
		return nil, err
	}
	return inNamespace(f.deployments, namespace), nil
}

func (f *fakeAPI) ListControllerRevisions(_ context.Context, namespace string) ([]appsv1.ControllerRevision, error) {
	if err := f.forbidden("controllerrevisions.apps", "controllerrevisions.apps", namespace); err != nil {
		return nil, err
	}
	return inNamespace(f.revisions, namespace), nil
}

func (f *fakeAPI) ListNodePools(context.Context) ([]NodePool, bool, error) {
	if !f.karpenter {
		return nil, false, nil
	}
	if f.forbid["list nodepools.karpenter.sh"] {
		return nil, true, refused{fmt.Errorf("list nodepools.karpenter.sh: %w",
			apierrors.NewForbidden(schema.GroupResource{Group: "karpenter.sh", Resource: "nodepools"}, "", errors.New("RBAC says no")))}
	}
	return f.nodePools, true, nil
}

func (f *fakeAPI) ListNodeReadinessRules(context.Context) ([]ReadinessRule, bool, error) {
	return f.rules, f.nrc, nil
}

// Exit statuses of kubectl node-ready doctor for each Outcome.
const (
	ExitOK         = 0
	ExitError      = 1
	ExitIncomplete = 3
)

// run is `kubectl node-ready [-n NAMESPACE] doctor [-o json]` on f, as the
// plugin runs it: the report on stdout, its warnings and verdict on
// stderr, the exit status. Without -n the kubeconfig's namespace is
// "default".
func run(f *fakeAPI, _ string, args ...string) (code int, stdout, stderr string, _ any) {
	ns, fallback, asJSON := "", "default", false
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-n":
			ns, fallback = args[i+1], ""
			i++
		case "-o":
			asJSON = args[i+1] == "json"
			i++
		}
	}
	rep := Examine(context.Background(), f, ns, fallback)
	var out, errOut bytes.Buffer
	if asJSON {
		rep.APIVersion, rep.Kind = "kubectl-node-ready/v1", "DoctorReport"
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			panic(err)
		}
		out.Write(append(data, '\n'))
	} else if err := Print(&out, rep); err != nil {
		panic(err)
	}
	for _, w := range rep.Warnings {
		text.Printf(&errOut, "warning: %s\n", w)
	}
	outcome, msg := rep.Outcome()
	if msg != "" {
		errOut.WriteString(msg + "\n")
	}
	return map[Outcome]int{OutcomeOK: ExitOK, OutcomeProblems: ExitError, OutcomeIncomplete: ExitIncomplete}[outcome], out.String(), errOut.String(), nil
}

// node is a node with taints, changed by mutate.
func node(name string, taints []corev1.Taint, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Finalizers: []string{api.Finalizer}},
		Spec: corev1.NodeSpec{Taints: taints}}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

// deleting marks a node as being deleted.
func deleting(n *corev1.Node) {
	t := metav1.NewTime(time.Date(2026, 11, 21, 14, 56, 0, 0, time.UTC))
	n.DeletionTimestamp = &t
}

var (
	readiness   = "readiness.k8s.io/node-ready=true:NoSchedule"
	seedStartup = Taint{Key: api.StartupTaintKey, Value: "true", Effect: "NoSchedule"}
)

// doctorFake is a cluster for doctor: our agent and webhook, then what
// the case adds.
func doctorFake(startup, unhealthy string, webhookArgs []string, deps ...appsv1.Deployment) *fakeAPI {
	f := newFake()
	f.daemonSets = []appsv1.DaemonSet{workloadtest.AgentDaemonSet(startup, unhealthy)}
	f.deployments = append([]appsv1.Deployment{workloadtest.WebhookDeployment(webhookArgs...)}, deps...)
	return f
}

func TestGoldenDoctor(t *testing.T) {
	for _, tt := range []struct {
		file     string
		fake     *fakeAPI
		args     []string
		wantCode int
	}{
		{"doctor-ca-no-flags.txt", doctorFake(api.StartupTaint, api.UnhealthyTaint, nil, workloadtest.ClusterAutoscalerDeployment()), nil, ExitError},
		{"doctor-ca-managed.txt", doctorFake(api.StartupTaint, api.UnhealthyTaint, nil), nil, ExitOK},
		{"doctor-ca-startup-taint.txt", doctorFake(api.StartupTaint, api.UnhealthyTaint, []string{"--remediation=replace", "--unverified-deadline=30m"},
			workloadtest.ClusterAutoscalerDeployment("--startup-taint=node-ready/unverified")), nil, ExitError},
		{"doctor-karpenter-missing.txt", func() *fakeAPI {
			f := doctorFake(api.StartupTaint, api.UnhealthyTaint, nil)
			f.karpenter = true
			f.nodePools = []NodePool{{Name: "default"}, {Name: "gpu", Taints: []Taint{{Key: "nvidia.com/gpu", Effect: "NoSchedule"}}}}
			return f
		}(), nil, ExitError},
		{"doctor-karpenter-readiness.txt", func() *fakeAPI {
			f := doctorFake(readiness, workloadtest.CAStatusTaint, nil, karpenterDep("public.ecr.aws/karpenter/controller:1.14.1"+ecrDigest, karpenterLabels("1.14.1")))
			f.karpenter = true
			r, _ := ParseTaint(readiness)
			f.nodePools = []NodePool{{Name: "default", StartupTaints: []Taint{r}}, {Name: "legacy", StartupTaints: []Taint{seedStartup}}}
			return f
		}(), nil, ExitOK},
		{"doctor-karpenter-v1.12.txt", func() *fakeAPI {
			f := doctorFake(readiness, workloadtest.CAStatusTaint, nil, karpenterDep("public.ecr.aws/karpenter/controller:1.12.1"+ecrDigest, karpenterLabels("1.12.1")))
			f.karpenter = true
			f.nodePools = []NodePool{{Name: "default"}}
			return f
		}(), nil, ExitError},
		{"doctor-both.txt", func() *fakeAPI {
			f := doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, nil, workloadtest.ClusterAutoscalerDeployment("--max-node-provision-time=10m"))
			f.karpenter = true
			f.nodePools = []NodePool{{Name: "default"}}
			return f
		}(), nil, ExitError},
		{"doctor-clean.txt", func() *fakeAPI {
			f := doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, []string{"--remediation=replace", "--unverified-deadline=14m"}, workloadtest.ClusterAutoscalerDeployment())
			f.karpenter = true
			s, _ := ParseTaint(workloadtest.CAStartupTaint)
			f.nodePools = []NodePool{{Name: "default", StartupTaints: []Taint{s}}}
			return f
		}(), nil, ExitOK},
		{"doctor-both.json", func() *fakeAPI {
			f := doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, nil, workloadtest.ClusterAutoscalerDeployment("--max-node-provision-time=10m"))
			f.karpenter = true
			f.nodePools = []NodePool{{Name: "default"}}
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
			golden.Compare(t, tt.file, []byte(out))
		})
	}
}

// TestDoctorReadFailures: a read RBAC refuses is named and makes the exit
// status 3 when nothing else is wrong; listing in all namespaces falls
// back to the kubeconfig's namespace for our workloads and to kube-system
// for Cluster Autoscaler, with a warning.
func TestDoctorReadFailures(t *testing.T) {
	clean := func() *fakeAPI {
		return doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, nil, workloadtest.ClusterAutoscalerDeployment())
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
	code, out, errOut, _ = run(f, "", "-n", workloadtest.Namespace, "doctor")
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
	if code, _, errOut, _ = run(f, "", "-n", workloadtest.Namespace, "doctor"); code != ExitIncomplete || !strings.Contains(errOut, "in namespace kube-node-ready: pass --namespace") {
		t.Errorf("-n of another namespace: exit %d, stderr %s", code, errOut)
	}
}

// TestDoctorReadsEnvironmentTwins: the agent's keys and the webhook's
// deadline set by KNR_* variables (the old --retaint-taint's among them)
// are read like the flags, and a flag wins over its twin.
func TestDoctorReadsEnvironmentTwins(t *testing.T) {
	ds := workloadtest.AgentDaemonSet(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint)
	c := &ds.Spec.Template.Spec.Containers[0]
	c.Args = []string{"--unhealthy-taint=" + workloadtest.CAStatusTaint}
	c.Env = []corev1.EnvVar{{Name: "KNR_AGENT_STARTUP_TAINT", Value: workloadtest.CAStartupTaint}, {Name: "KNR_AGENT_UNHEALTHY_TAINT", Value: api.UnhealthyTaint}}
	in, warnings := readAgent(&ds)
	if in.Startup.String() != workloadtest.CAStartupTaint || in.Unhealthy.String() != workloadtest.CAStatusTaint || len(warnings) > 0 {
		t.Errorf("agent: %+v %v; want the startup taint from the environment and the unhealthy one from the flag", in, warnings)
	}
	c.Args = nil
	c.Env = []corev1.EnvVar{{Name: "KNR_AGENT_RETAINT_TAINT", Value: workloadtest.CAStatusTaint},
		{Name: "KNR_AGENT_STARTUP_TAINT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}}
	in, warnings = readAgent(&ds)
	if in.Unhealthy.String() != workloadtest.CAStatusTaint || in.Startup.String() != api.Default().StartupTaint() || len(warnings) != 1 || !strings.Contains(warnings[0], "KNR_AGENT_STARTUP_TAINT") {
		t.Errorf("agent: %+v %v; want the old twin read and the ConfigMap-set one warned about", in, warnings)
	}
	d := workloadtest.WebhookDeployment()
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KNR_WEBHOOK_REMEDIATION", Value: "report"}, {Name: "KNR_WEBHOOK_UNVERIFIED_DEADLINE", Value: "20m"}}
	if keys, warnings := readWebhook(&in, &d); in.Remediation != "report" || in.UnverifiedDeadline.String() != "20m0s" || len(warnings) > 0 || keys.set {
		t.Errorf("webhook: %+v %+v %v", in, keys, warnings)
	}
}

// TestDoctorWebhookKeys: a webhook watching other keys than its agent
// writes is warned about; a webhook without an agent gives the keys it
// watches.
func TestDoctorWebhookKeys(t *testing.T) {
	f := doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, []string{"--remediation=replace", "--unverified-deadline=10m", "--agent-startup-taint=" + api.StartupTaint, "--agent-unhealthy-taint=" + workloadtest.CAStatusTaint}, workloadtest.ClusterAutoscalerDeployment())
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
	ds := workloadtest.AgentDaemonSet(api.StartupTaint, api.UnhealthyTaint)
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
		{"agent by label", ds.Spec.Template, AgentApp, true},
		{"agent by image", relabelled.Spec.Template, AgentApp, true},
		{"another DaemonSet", other.Spec.Template, AgentApp, false},
		{"the agent is not the webhook", ds.Spec.Template, WebhookApp, false},
		{"webhook by label", workloadtest.WebhookDeployment().Spec.Template, WebhookApp, true},
	} {
		if got := IsOurs(tt.t, tt.app); got != tt.want {
			t.Errorf("%s: isOurs = %t", tt.name, got)
		}
	}
}

// TestDoctorReadsThePreset: an agent given only --autoscaler writes that
// preset's keys, and a webhook given none remediates after the default
// preset's deadline: doctor reads them as the binaries resolve them.
func TestDoctorReadsThePreset(t *testing.T) {
	ds := workloadtest.AgentDaemonSet(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint)
	ds.Spec.Template.Spec.Containers[0].Args = []string{"--autoscaler=" + api.PresetKarpenter}
	in, warnings := readAgent(&ds)
	if in.Startup.String() != readiness || in.Unhealthy.String() != workloadtest.CAStatusTaint || len(warnings) > 0 {
		t.Errorf("agent with --autoscaler=karpenter: %+v %v; want the karpenter preset's keys", in, warnings)
	}
	ds.Spec.Template.Spec.Containers[0].Args = []string{"--autoscaler=cluster-autoscaler", "--startup-taint=" + api.StartupTaint}
	if in, _ = readAgent(&ds); in.Startup.String() != api.StartupTaint || in.Unhealthy.String() != workloadtest.CAStatusTaint {
		t.Errorf("agent with the CA preset and a startup taint: %+v; want the flag's startup taint and the preset's unhealthy one", in)
	}
	ds.Spec.Template.Spec.Containers[0].Args = []string{"--autoscaler=fargate"}
	if in, warnings = readAgent(&ds); in.Startup.String() != workloadtest.CAStartupTaint || len(warnings) != 1 || !strings.Contains(warnings[0], `unknown autoscaler "fargate"`) {
		t.Errorf("agent with an unknown preset: %+v %v; want the default preset's keys and a warning", in, warnings)
	}
	for preset, want := range map[string]string{"": "10m0s", api.PresetKarpenter: "30m0s"} {
		d := workloadtest.WebhookDeployment("--remediation=report")
		if preset != "" {
			d = workloadtest.WebhookDeployment("--remediation=report", "--autoscaler="+preset)
		}
		readWebhook(&in, &d)
		if in.UnverifiedDeadline.String() != want {
			t.Errorf("webhook with --autoscaler=%q: deadline %s, want %s", preset, in.UnverifiedDeadline, want)
		}
	}
}
