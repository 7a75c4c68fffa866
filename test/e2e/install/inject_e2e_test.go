//go:build e2e

package install_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/test/e2e/installkit"
)

// doctorFindsNothing: with the chart's defaults (the cluster-autoscaler
// preset, the startup taint added at creation) and a node that joined with
// no taint flag, kubectl node-ready doctor finds nothing to fix and names
// no node as joined without admission.
func doctorFindsNothing(t *testing.T) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := kubectlplugin.Run(t.Context(), []string{"doctor", "-n", installkit.Namespace, "-o", "json"}, kubectlplugin.Env{
		Stdout: &out, Stderr: &errOut,
		Connect: func(*kubectlplugin.Connection) (kubectlplugin.API, string, bool, error) {
			return kubectlplugin.NewAPI(kit.C.Client), installkit.Namespace, true, nil
		},
	})
	var rep doctor.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("doctor -o json (exit %d): %v\n%s\nstderr:\n%s", code, err, out.String(), errOut.String())
	}
	if code != 0 || rep.Problems != 0 {
		t.Errorf("doctor exit %d, %d problems, want nothing to fix:\n%s\nstderr:\n%s", code, rep.Problems, out.String(), errOut.String())
	}
	if strings.Contains(errOut.String(), "joined without") {
		t.Errorf("doctor names a node as joined without admission:\n%s", errOut.String())
	}
}
