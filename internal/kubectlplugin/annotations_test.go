package kubectlplugin

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// TestBypassReadsTheDeployedName: bypass and unbypass use the
// skip-verification annotation the deployed agent reads (its flag, the
// its environment twin), the default with a note when no
// agent DaemonSet is found, and with a warning when none can be listed.
func TestBypassReadsTheDeployedName(t *testing.T) {
	withArgs := func(args ...string) appsv1.DaemonSet {
		ds := workloadtest.AgentDaemonSet(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint)
		ds.Spec.Template.Spec.Containers[0].Args = append(ds.Spec.Template.Spec.Containers[0].Args, args...)
		return ds
	}
	withEnv := workloadtest.AgentDaemonSet(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint)
	withEnv.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KNR_AGENT_SKIP_VERIFICATION_ANNOTATION", Value: "example.com/env"}}
	for _, tt := range []struct {
		name      string
		dss       []appsv1.DaemonSet
		forbid    bool
		want      []string
		wantNotes string
	}{
		{"the chart's agent.skipAnnotation", []appsv1.DaemonSet{withArgs("--skip-verification-annotation=example.com/let-through")}, false, []string{"example.com/let-through"}, ""},
		{"the environment twin", []appsv1.DaemonSet{withEnv}, false, []string{"example.com/env"}, ""},
		{"the binary's default", []appsv1.DaemonSet{withArgs()}, false, []string{api.SkipVerificationAnnotation}, ""},
		{"no agent: the default, said", nil, false, []string{api.SkipVerificationAnnotation},
			"note: no kube-node-ready agent DaemonSet found in all namespaces: using the default skip-verification annotation node-ready/skip-verification"},
		{"not allowed to list: the default, warned", []appsv1.DaemonSet{withArgs("--skip-verification-annotation=example.com/x")}, true, []string{api.SkipVerificationAnnotation},
			"warning: not allowed to list daemonsets.apps in namespace default"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(testNode("a", "", []corev1.Taint{startupTaint}, nil))
			f.daemonSets = tt.dss
			if tt.forbid {
				f.forbid["list daemonsets.apps *"] = true
				f.forbid["list daemonsets.apps default"] = true
			}
			code, out, errOut, _ := run(f, "", "bypass", "a")
			if code != ExitOK || !strings.Contains(out, "bypassed: "+setTo(tt.want, "true")) || !strings.Contains(errOut, tt.wantNotes) || (tt.wantNotes == "" && errOut != "") {
				t.Fatalf("bypass: exit %d\nstdout %s\nstderr %s", code, out, errOut)
			}
			got := f.nodes["a"].Annotations
			if !allSet(f.nodes["a"], tt.want, "true") || len(got) != len(tt.want) {
				t.Errorf("annotations after bypass %v, want %v=true only", got, tt.want)
			}
			if code, out, _, _ = run(f, "", "unbypass", "a"); code != ExitOK || len(f.nodes["a"].Annotations) != 0 {
				t.Errorf("unbypass: exit %d, %s; annotations left %v", code, out, f.nodes["a"].Annotations)
			}
		})
	}
}

// TestCleanupSkipReadsTheDeployedName: cleanup skip sets the skip-cleanup
// annotation the deployed webhook reads; the default, with a note, when no webhook is found.
func TestCleanupSkipReadsTheDeployedName(t *testing.T) {
	for _, tt := range []struct {
		deps      []appsv1.Deployment
		want      string
		wantNotes string
	}{
		{[]appsv1.Deployment{workloadtest.WebhookDeployment("--skip-cleanup-annotation=example.com/no-cleanup")}, "example.com/no-cleanup", ""},
		{nil, api.SkipCleanupAnnotation, "note: no kube-node-ready webhook Deployment found in all namespaces: using the default skip-cleanup annotation infra.894.io/skip-cleanup"},
	} {
		f := newFake(testNode("a", "true", nil, nil, deleting))
		f.deployments = tt.deps
		code, out, errOut, _ := run(f, "", "cleanup", "skip", "a", "--yes")
		if code != ExitOK || !strings.Contains(out, "annotated "+tt.want+"=true") || !strings.Contains(errOut, tt.wantNotes) || (tt.wantNotes == "" && errOut != "") {
			t.Errorf("%s: exit %d\nstdout %s\nstderr %s", tt.want, code, out, errOut)
		}
		if got := f.nodes["a"].Annotations[tt.want]; got != "true" {
			t.Errorf("%s: annotations %v", tt.want, f.nodes["a"].Annotations)
		}
	}
}
