package kubectlplugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
)

// switchFake is fakeAPI with ConfigMaps, for the suspend switch.
type switchFake struct {
	*fakeAPI
	cms map[string]*corev1.ConfigMap // by namespace/name
}

func (f *switchFake) GetConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return f.cms[ns+"/"+name], nil
}

func (f *switchFake) ApplyConfigMap(_ context.Context, cm *corev1.ConfigMap) (bool, error) {
	_, there := f.cms[cm.Namespace+"/"+cm.Name]
	f.cms[cm.Namespace+"/"+cm.Name] = cm
	return !there, nil
}

func (f *switchFake) DeleteConfigMap(_ context.Context, ns, name string) (bool, error) {
	_, there := f.cms[ns+"/"+name]
	delete(f.cms, ns+"/"+name)
	return there, nil
}

func (f *switchFake) User(context.Context) string { return "alice" }

func runSwitch(f *switchFake, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, Env{
		Stdout: &out, Stderr: &errOut,
		Connect: func(*Connection) (API, string, bool, error) { return f, "default", false, nil },
		Now:     func() time.Time { return now },
	})
	return code, out.String(), errOut.String()
}

// TestSuspendAndResume: suspend writes the switch the deployed release
// reads (its namespace, its agents' --suspend-configmap) with the reason,
// the time and the user; status shows it with its reason and age; resume
// deletes it.
func TestSuspendAndResume(t *testing.T) {
	f := &switchFake{fakeAPI: newFake(), cms: map[string]*corev1.ConfigMap{}}
	ds := appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "knr", Name: "kube-node-ready"}}
	ds.Spec.Template.Labels = map[string]string{"app": doctor.AgentApp}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "agent", Args: []string{"--suspend-configmap=my-switch"}}}
	f.daemonSets = []appsv1.DaemonSet{ds}

	if code, _, stderr := runSwitch(f, "suspend"); code == 0 || !strings.Contains(stderr, "--reason is required") {
		t.Errorf("suspend without --reason: exit %d, %q; want it refused", code, stderr)
	}
	code, out, stderr := runSwitch(f, "suspend", "--reason", "DNS incident")
	if code != 0 {
		t.Fatalf("suspend: exit %d: %s%s", code, out, stderr)
	}
	cm := f.cms["knr/my-switch"]
	if cm == nil || cm.Data[api.SuspendReasonKey] != "DNS incident" || cm.Data[api.SuspendByKey] != "alice" || cm.Data[api.SuspendSinceKey] != now.UTC().Format(time.RFC3339) {
		t.Fatalf("switch written %+v, want knr/my-switch with reason, user and time; out %q", cm, out)
	}
	now1 := now
	cm.Data[api.SuspendSinceKey] = now1.Add(-90 * time.Second).UTC().Format(time.RFC3339)
	_, out, _ = runSwitch(f, "status")
	if !strings.Contains(out, "SUSPENDED (for 1m30s by alice, configmap/my-switch in knr): DNS incident") {
		t.Errorf("status does not show the switch with its age and reason:\n%s", out)
	}
	_, out, _ = runSwitch(f, "resume")
	if _, there := f.cms["knr/my-switch"]; there || !strings.Contains(out, "resumed") {
		t.Errorf("resume left the switch: %q", out)
	}
	if _, out, _ = runSwitch(f, "status"); strings.Contains(out, "SUSPENDED") {
		t.Errorf("status still says suspended after resume:\n%s", out)
	}
}
