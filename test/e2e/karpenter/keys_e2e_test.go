//go:build e2e

package karpenter

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// keysRunaway is how many NodeClaims the mis-configured scenario waits for
// Karpenter to make for one pending pod: the runaway shown by a count, not
// by a window of time (it made 7 to 21 in 60 s).
const keysRunaway = 3

// keysMany bounds the NodeClaims alive at once in the keys pool: far more
// than it makes before keysRunaway, so only a runaway past all reason fails
// before the count.
const keysMany = 1000

// registerWithTaints puts our startup taint on every new Node of the keys
// pool at CREATE, as a kubelet's --register-with-taints does, by a
// MutatingAdmissionPolicy: the pool does not declare it in startupTaints.
var registerWithTaints = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: knr-e2e-register-with-taints
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [nodes]
  matchConditions:
  - name: keys-pool
    expression: "has(object.metadata.labels) && object.metadata.labels[?'knr-e2e/pool'].orValue('') == 'keys'"
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [JSONPatch{op: "add", path: "/spec/taints/-", value: Object.spec.taints{key: "` + harness.StartupTaint.Key + `", value: "true", effect: "NoSchedule"}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: knr-e2e-register-with-taints
spec:
  policyName: knr-e2e-register-with-taints
`

// Mis-configured keys: our taint is on the keys pool's Nodes from their
// creation but not in the pool's startupTaints, so Karpenter takes it for
// a permanent taint the pending pod does not tolerate: it initializes the
// node at once and launches another, and another, while the node is not
// verified (its agent's check cannot pass). Once it made keysRunaway
// NodeClaims, `kubectl node-ready doctor` names the pool, and the pod is
// deleted, which stops it.
func (e *env) testMisconfiguredKeys(t *testing.T) {
	const pool = "keys"
	e.cp.KubectlT(t, registerWithTaints, "apply", "-f", "-")
	t.Cleanup(func() {
		e.cp.KubectlT(t, "", "delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", "knr-e2e-register-with-taints", "--ignore-not-found")
	})
	e.pool(t, pool, harness.NodePoolOptions{
		Annotations: map[string]string{"infra.894.io/protect": "true"},
	}, neverVerifies)
	e.pendingPod(t, "keys-0", pool)
	w := e.watchClaims(pool)
	w.waitTainted(t, keysMany)
	start, rounds := time.Now(), e.karpenterRounds(t)
	harness.Eventually(t, roundsLimit, fmt.Sprintf("%d NodeClaims for one pending pod with our taint not declared", keysRunaway), func() (bool, string) {
		w.poll(t, keysMany)
		return len(w.seen) >= keysRunaway, fmt.Sprintf("%d NodeClaims", len(w.seen))
	})
	made, took, grown := len(w.seen), time.Since(start), e.karpenterRounds(t)-rounds
	e.doctorNames(t, "problem: Karpenter nodepool/keys, startup taint "+harness.StartupTaint.Key+": runaway launches")
	e.deletePod(t, "keys-0")
	t.Logf("figure: mis-configured keys: %d NodeClaims for 1 pending pod within %v of Karpenter's scheduling rounds (%s; our taint put on at Node CREATE, not in startupTaints)",
		made, grown, took.Round(time.Second))
}

// doctorNames runs `kubectl node-ready doctor` (the plugin `make build`
// wrote to bin/, found on PATH as kubectl finds plugins) against the
// cluster and fails t unless it exits 1 and its report holds finding.
func (e *env) doctorNames(t *testing.T, finding string) {
	t.Helper()
	harness.BuiltBinary(t, "kubectl-node_ready")
	cmd := exec.CommandContext(t.Context(), filepath.Join(e.cp.BinDir, "kubectl"), "node-ready", "doctor", "-n", ns)
	cmd.Env = append(os.Environ(), "PATH="+e.cp.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+e.cp.Kubeconfig, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != kubectlplugin.ExitError {
		t.Fatalf("kubectl node-ready doctor: %v, want exit status %d:\n%s", err, kubectlplugin.ExitError, out)
	}
	if !strings.Contains(string(out), finding) {
		t.Fatalf("kubectl node-ready doctor does not say %q:\n%s", finding, out)
	}
	t.Logf("kubectl node-ready doctor names the mis-configured pool: %q", finding)
}
