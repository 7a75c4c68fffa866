package doctor

import (
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// karpenterDep is a Karpenter Deployment as the AWS provider's chart
// renders it: its labels and one controller container running image.
func karpenterDep(image string, labels map[string]string) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "karpenter", Name: "karpenter", Labels: labels},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: image}}},
		}},
	}
}

// karpenterLabels are the labels Karpenter's chart of version v puts on
// its Deployment.
func karpenterLabels(v string) map[string]string {
	return map[string]string{"helm.sh/chart": "karpenter-" + v, "app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter",
		"app.kubernetes.io/version": v, "app.kubernetes.io/managed-by": "Helm"}
}

const ecrDigest = "@sha256:0b3b1e8c2c9a8f3f2c6d0f6a5e4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b"

func TestReadKarpenter(t *testing.T) {
	for _, tt := range []struct {
		name        string
		dep         appsv1.Deployment
		want        string // the version read, "-" for not Karpenter
		wantFrom    string
		wantIgnores bool
	}{
		{"AWS chart: tag and digest", karpenterDep("public.ecr.aws/karpenter/controller:1.14.1"+ecrDigest, karpenterLabels("1.14.1")), "1.14.1", "its image ", true},
		{"tag with v", karpenterDep("public.ecr.aws/karpenter/controller:v1.12.1", nil), "1.12.1", "its image ", false},
		{"Azure's image", karpenterDep("mcr.microsoft.com/aks/karpenter/controller:1.13.0", nil), "1.13.0", "its image ", true},
		{"core's KWOK provider image", karpenterDep("registry.example/karpenter-kwok:v1.14.1", nil), "1.14.1", "its image ", true},
		{"digest only: the version label", karpenterDep("public.ecr.aws/karpenter/controller"+ecrDigest, karpenterLabels("1.13.0")), "1.13.0", "its label app.kubernetes.io/version=1.13.0", true},
		{"digest only: the chart label", karpenterDep("public.ecr.aws/karpenter/controller"+ecrDigest, map[string]string{"helm.sh/chart": "karpenter-1.12.0"}),
			"1.12.0", "its label helm.sh/chart=karpenter-1.12.0", false},
		{"a registry port is not a tag", karpenterDep("registry.local:5000/karpenter/controller", nil), "", "", false},
		{"latest names no release", karpenterDep("public.ecr.aws/karpenter/controller:latest", nil), "", "", false},
		{"a pre-release of v1.13.0 comes before it", karpenterDep("public.ecr.aws/karpenter/controller:1.13.0-rc.1", nil), "1.13.0-rc.1", "its image ", false},
		{"an image renamed, by its chart label", karpenterDep("mirror.example/ops/kc:1.2.3", map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/version": "1.14.0"}),
			"1.14.0", "its label app.kubernetes.io/version=1.14.0", true},
		{"another controller", karpenterDep("registry.k8s.io/ingress-nginx/controller:v1.13.0", nil), "-", "", false},
		{"Cluster Autoscaler", workloadtest.ClusterAutoscalerDeployment(), "-", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, ok := readKarpenter(&tt.dep)
			if !ok {
				if tt.want != "-" {
					t.Fatalf("not read as Karpenter")
				}
				return
			}
			if tt.want == "-" {
				t.Fatalf("read as Karpenter %+v", k)
			}
			if k.Version != tt.want || !strings.HasPrefix(k.VersionFrom, tt.wantFrom) || k.Deployment != "Deployment karpenter/karpenter" {
				t.Errorf("read %+v, want version %q from %q", k, tt.want, tt.wantFrom)
			}
			if ignores, _ := k.ReadinessPrefix(); ignores != tt.wantIgnores {
				t.Errorf("%s ignores readiness.k8s.io/: %v, want %v", k.Named(), ignores, tt.wantIgnores)
			}
		})
	}
}

// TestDoctorReadsKarpenterVersion: an undeclared readiness.k8s.io/ key is
// startup only on Karpenter v1.13.0 and later. On v1.12 doctor calls it
// permanent (runaway launches) with the fix, a problem; so too when a
// visible Karpenter's version cannot be read; with none visible (a managed
// Karpenter) it says so as advice. Before doctor read the version, all of
// them were advice at most.
func TestDoctorReadsKarpenterVersion(t *testing.T) {
	const finding = "Karpenter nodepool/default, startup taint readiness.k8s.io/node-ready: runaway launches"
	const declare = `fix: declare readiness.k8s.io/node-ready=true:NoSchedule in spec.template.spec.startupTaints`
	for _, tt := range []struct {
		name     string
		deps     []appsv1.Deployment
		declared bool
		wantCode int
		want     []string
		wantNot  []string
	}{
		{"v1.12.1, undeclared", []appsv1.Deployment{karpenterDep("public.ecr.aws/karpenter/controller:1.12.1"+ecrDigest, karpenterLabels("1.12.1"))}, false, ExitError,
			[]string{"problem: " + finding, "Deployment karpenter/karpenter runs Karpenter v1.12.1", declare, "upgrade Karpenter to v1.13.0 or later",
				"Deployment karpenter/karpenter: Karpenter v1.12.1 (from its image public.ecr.aws/karpenter/controller:1.12.1)"}, nil},
		{"v1.12.1, declared", []appsv1.Deployment{karpenterDep("public.ecr.aws/karpenter/controller:1.12.1", karpenterLabels("1.12.1"))}, true, ExitOK,
			nil, []string{finding}},
		{"v1.14.1, undeclared", []appsv1.Deployment{karpenterDep("public.ecr.aws/karpenter/controller:1.14.1"+ecrDigest, karpenterLabels("1.14.1"))}, false, ExitOK,
			[]string{"advice: Karpenter nodepool/default, startup taint readiness.k8s.io/node-ready: not put on new nodes by Karpenter"}, []string{finding}},
		{"two controllers: the older decides", []appsv1.Deployment{karpenterDep("public.ecr.aws/karpenter/controller:1.14.1", nil),
			func() appsv1.Deployment {
				d := karpenterDep("public.ecr.aws/karpenter/controller:1.11.2", nil)
				d.Namespace = "kube-system"
				return d
			}()}, false, ExitError, []string{"problem: " + finding, "Deployment kube-system/karpenter runs Karpenter v1.11.2"}, nil},
		{"version unreadable", []appsv1.Deployment{karpenterDep("public.ecr.aws/karpenter/controller:latest", nil)}, false, ExitError,
			[]string{"problem: " + finding, "The version of Deployment karpenter/karpenter could not be read", declare,
				"Deployment karpenter/karpenter: Karpenter (version unknown) (no image tag or label names its release)"}, nil},
		{"no Karpenter Deployment visible", nil, false, ExitOK,
			[]string{"advice: " + finding, "No Karpenter Deployment is visible", declare, "no Deployment visible: its version is unknown"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := doctorFake(readiness, workloadtest.CAStatusTaint, nil, tt.deps...)
			f.karpenter = true
			f.nodePools = []NodePool{{Name: "default"}}
			if tt.declared {
				r, _ := ParseTaint(readiness)
				f.nodePools[0].StartupTaints = []Taint{r}
			}
			code, out, errOut, _ := run(f, "", "doctor")
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr %q\n%s", code, tt.wantCode, errOut, out)
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, w := range tt.want {
				if !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
					t.Errorf("doctor does not say %q:\n%s", w, out)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(flat, w) {
					t.Errorf("doctor says %q:\n%s", w, out)
				}
			}
		})
	}
}
