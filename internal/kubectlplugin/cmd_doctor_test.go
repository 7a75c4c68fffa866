package kubectlplugin

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// TestDoctorCommand: the command's wiring (the report's own tests are
// doctor's): a problem found exits 1, a read it needs that failed with no
// problem exits 3, and -o json prints a DoctorReport of this API version.
func TestDoctorCommand(t *testing.T) {
	f := newFake()
	f.daemonSets = []appsv1.DaemonSet{workloadtest.AgentDaemonSet(api.StartupTaint, api.UnhealthyTaint)}
	f.deployments = []appsv1.Deployment{workloadtest.WebhookDeployment(), workloadtest.ClusterAutoscalerDeployment()}
	code, out, errOut, _ := run(f, "", "doctor")
	if code != ExitError || !strings.Contains(out, "Cluster Autoscaler:  Deployment kube-system/cluster-autoscaler") ||
		!strings.HasSuffix(errOut, "found: see the fixes above\n") {
		t.Errorf("Cluster Autoscaler without flags: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitError, out, errOut)
	}

	f.daemonSets = nil
	f.deployments = f.deployments[1:]
	code, out, errOut, _ = run(f, "", "doctor", "-o", "json")
	var rep struct{ APIVersion, Kind string }
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.APIVersion != ListAPIVersion || rep.Kind != DoctorKind {
		t.Errorf("-o json: %+v %v\n%s", rep, err, out)
	}
	if code != ExitIncomplete || !strings.Contains(errOut, "doctor: could not read what it needs: no kube-node-ready agent DaemonSet") {
		t.Errorf("no agent: exit %d, want %d; stderr %q", code, ExitIncomplete, errOut)
	}
}
