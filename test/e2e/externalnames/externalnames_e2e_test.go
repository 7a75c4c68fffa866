//go:build e2e

package externalnames_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	release   = "kube-node-ready"
	namespace = "kube-node-ready"
	// unresolvable is a name the cluster DNS does not resolve: the
	// harness's CoreDNS answers harness.ExternalName and forwards nothing.
	unresolvable = "nowhere.example.test"
)

// TestDoctorSaysWhenAnExternalNameDoesNotResolve: with agent.dns.externalNames
// naming one name the cluster resolves and one it does not, `kubectl
// node-ready doctor` names the second, with the webhook pod it failed from,
// and exits 1; with that name removed (helm upgrade), the new webhook pods
// resolve the rest and doctor finds no problem.
func TestDoctorSaysWhenAnExternalNameDoesNotResolve(t *testing.T) {
	v, err := c.LocalImageValues("checkPeriod: 2s", "")
	if err != nil {
		t.Fatal(err)
	}
	vals := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vals, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	names := func(ns ...string) string { return "agent.dns.externalNames={" + strings.Join(ns, ",") + "}" }
	start := time.Now()
	// No --wait: agents given a name that does not resolve never verify their node.
	c.HelmT(t, "install", release, chart, "--namespace", namespace, "--create-namespace", "--values", vals,
		"--set", names(harness.ExternalName, unresolvable))
	rollout(t)
	var out string
	harness.Eventually(t, time.Minute, "doctor naming "+unresolvable, func() (bool, string) {
		var code int
		out, code = doctor(t)
		return code == 1 && strings.Contains(out, unresolvable+" does not resolve from webhook pod "+release+"-webhook-"), fmt.Sprintf("exit %d:\n%s", code, out)
	})
	t.Logf("doctor named %s %s after helm install:\n%s", unresolvable, time.Since(start).Round(time.Millisecond), out)
	if strings.Contains(out, harness.ExternalName+" does not resolve") {
		t.Errorf("doctor says %s, which the cluster resolves, does not resolve:\n%s", harness.ExternalName, out)
	}
	if !strings.Contains(out, "agent.dns.externalNames={"+harness.ExternalName+"}") {
		t.Errorf("doctor's fix does not keep %s alone:\n%s", harness.ExternalName, out)
	}

	start = time.Now()
	c.HelmT(t, "upgrade", release, chart, "--namespace", namespace, "--reuse-values", "--set", names(harness.ExternalName))
	rollout(t)
	harness.Eventually(t, time.Minute, "doctor finding no problem", func() (bool, string) {
		var code int
		out, code = doctor(t)
		return code == 0 && !strings.Contains(out, "does not resolve"), fmt.Sprintf("exit %d:\n%s", code, out)
	})
	t.Logf("doctor found no problem %s after helm upgrade", time.Since(start).Round(time.Millisecond))
}

// rollout waits until the webhook Deployment's pods are the current ones.
func rollout(t *testing.T) {
	t.Helper()
	if out, err := c.Kubectl(t.Context(), nil, "rollout", "status", "-n", namespace, "deployment/"+release+"-webhook", "--timeout=2m"); err != nil {
		t.Fatalf("webhook rollout: %v\n%s", err, out)
	}
}

// doctor runs `kubectl node-ready doctor` for the release's namespace and
// returns its output and exit code.
func doctor(t *testing.T) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(c.BinDir, "kubectl-node_ready"), "--kubeconfig", c.Kubeconfig, "doctor", "-n", namespace)
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(b), 0
	case errors.As(err, &exit):
		return string(b), exit.ExitCode()
	}
	t.Fatalf("kubectl node-ready doctor: %v\n%s", err, b)
	return "", 0
}
