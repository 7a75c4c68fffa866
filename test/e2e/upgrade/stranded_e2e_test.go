//go:build e2e

package upgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// faultCondition is a node condition the working tree's agents check in
// every round (their conditions gate, made continuous, requires it False
// and passes where it is absent): set True on one node, it fails that
// node's checks, and only that node's, as a real fault would.
const faultCondition = "UpgradeTestFault"

// faultGate are the working tree's agent values that check faultCondition
// continuously. The previous release is installed without them.
var faultGate = fmt.Sprintf("gates: {conditions: {require: [%s=False], absent: pass}}\ncontinuousChecks: [dns, api, network, discovery, conditions]", faultCondition)

// setFault sets faultCondition on node to status.
func (e *env) setFault(t *testing.T, node string, status corev1.ConditionStatus) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: faultCondition, Status: status, Reason: "UpgradeTest", Message: "set by the upgrade test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Client.CoreV1().Nodes().PatchStatus(t.Context(), node, patch); err != nil {
		t.Fatalf("set %s=%s on node %s: %v", faultCondition, status, node, err)
	}
}

// retaint: the working tree's agent re-taints a real node whose checks keep
// failing, with the Cluster Autoscaler preset's status key, which the
// previous release does not know.
func (e *env) retaint(t *testing.T) {
	start := time.Now()
	e.victim = e.c.Nodes[0].Name
	e.mon.exemptNode(e.victim)
	e.setFault(t, e.victim, corev1.ConditionTrue)
	e.c.WaitNode(t, e.victim, time.Minute, "re-tainted by the new agent with "+api.CAStatusTaintKey, func(n *corev1.Node) bool {
		return hasTaint(n, api.CAStatusTaintKey) && n.Labels[verifiedLabel] == "false"
	})
	t.Logf("node %s re-tainted with %s by the new agent %s after its fault", e.victim, api.CAStatusTaintKey, time.Since(start).Round(time.Millisecond))
}

// doctor runs this tree's kubectl node-ready doctor -o json against the
// cluster and returns its report and exit status.
func (e *env) doctor(t *testing.T) (doctor.Report, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := kubectlplugin.Run(t.Context(), []string{"doctor", "-n", namespace, "-o", "json"}, kubectlplugin.Env{
		Stdout: &out, Stderr: &errOut,
		Connect: func(*kubectlplugin.Connection) (kubectlplugin.API, string, bool, error) {
			return kubectlplugin.NewAPI(e.c.Client), namespace, true, nil
		},
	})
	var rep doctor.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("doctor -o json (exit %d): %v\n%s\nstderr:\n%s", code, err, out.String(), errOut.String())
	}
	return rep, code
}

// nothingStranded: the previous release's agent and the working tree's
// know the same keys, so no taint of ours is left that no running agent
// removes; doctor names none.
func (e *env) nothingStranded(t *testing.T, when string) {
	t.Helper()
	if rep, _ := e.doctor(t); len(rep.StrandedTaints) > 0 {
		t.Errorf("doctor %s names stranded taints: %+v", when, rep.StrandedTaints)
	}
}

// rollForward: the fault gone, helm upgrade to the working tree again:
// every real node stays verified with no taint of ours, and doctor names no
// taint that no agent removes.
func (e *env) rollForward(t *testing.T) {
	e.setFault(t, e.victim, corev1.ConditionFalse)
	e.roll(t, "roll-forward", e.newTag, "upgrade", release, e.newChart, "--namespace", namespace, "--values", e.newVals, "--wait", "--timeout", "3m")
	e.leaseHeldBy(t, e.newTag)
	for _, rn := range e.c.Nodes {
		e.c.WaitNode(t, rn.Name, time.Second, "no taint of ours", func(n *corev1.Node) bool {
			return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return harness.OurTaint(t.Key) })
		})
	}
	e.nothingStranded(t, "after the roll forward")
	e.afterRoll(t, "after the roll forward")
}
