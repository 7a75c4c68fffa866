//go:build e2e

package nrc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestDoctorNamesARuleThatAdoptsOurTaint: with the CRD served, `kubectl
// node-ready doctor` reads the NodeReadinessRules from the real API server
// and names a rule keyed readiness.k8s.io/node-ready as adopting our taint,
// a problem with no agent in publish mode (exit 1), with both fixes; the
// documented rule, keyed readiness.k8s.io/kube-node-ready, is not named.
func TestDoctorNamesARuleThatAdoptsOurTaint(t *testing.T) {
	rules := documentedRules(t)
	if err := createRule(t, rules["one"].raw); err != nil {
		t.Fatal(err)
	}
	adopting := strings.Replace(rules["one"].raw, "name: "+rules["one"].Metadata.Name, "name: adopts-ours", 1)
	adopting = strings.Replace(adopting, "key: "+rules["one"].Spec.Taint.Key, "key: "+api.KarpenterStartupTaintKey, 1)
	if err := createRule(t, adopting); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), harness.BuiltBinary(t, "kubectl-node_ready"), "doctor")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig, "HOME="+t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("doctor: %v, want exit 1 (a problem)\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{
		"NodeReadinessRules (node readiness controller):",
		"problem: NodeReadinessRule adopts-ours adopts our taint " + api.KarpenterStartupTaintKey,
		"kubectl delete nodereadinessrule adopts-ours",
		"--mode=publish",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "NodeReadinessRule "+rules["one"].Metadata.Name+" ") {
		t.Errorf("doctor names the documented rule, whose key is its own:\n%s", out.String())
	}
}
