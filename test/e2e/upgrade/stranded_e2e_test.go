//go:build e2e

package upgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
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

// joinsWithNewerKey: after the rollback a real node joins with the working
// tree's startup key (its node group already switched to it): the previous
// release's agent runs its rounds there (it labels the node verified) and
// never removes that key.
func (e *env) joinsWithNewerKey(t *testing.T) {
	t.Helper()
	start := time.Now()
	rn, err := e.c.AddNode(t.Context(), harness.RealNodeOptions{Name: "joins-with-newer-key", Taints: []corev1.Taint{
		{Key: api.CAStartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}}})
	if err != nil {
		t.Fatal(err)
	}
	e.joined = rn.Name
	e.holdOut = append(e.holdOut, rn.Name)
	e.c.WaitNode(t, rn.Name, 2*time.Minute, "passed by the previous release's agent (label "+verifiedLabel+"=true), "+api.CAStartupTaintKey+" kept", func(n *corev1.Node) bool {
		return n.Labels[verifiedLabel] == "true" && hasTaint(n, api.CAStartupTaintKey)
	})
	t.Logf("node %s joined with %s after the rollback: the previous release's agent passed it in %s and left the key", rn.Name, api.CAStartupTaintKey,
		time.Since(start).Round(time.Millisecond))
}

// doctor runs this tree's kubectl node-ready doctor -o json against the
// cluster and returns its report and exit status.
func (e *env) doctor(t *testing.T) (kubectlplugin.DoctorReport, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := kubectlplugin.Run(t.Context(), []string{"doctor", "-n", namespace, "-o", "json"}, kubectlplugin.Env{
		Stdout: &out, Stderr: &errOut,
		Connect: func(*kubectlplugin.Connection) (kubectlplugin.API, string, bool, error) {
			return kubectlplugin.NewAPI(e.c.Client), namespace, true, nil
		},
	})
	var rep kubectlplugin.DoctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("doctor -o json (exit %d): %v\n%s\nstderr:\n%s", code, err, out.String(), errOut.String())
	}
	return rep, code
}

// strandedAfterRollback: the previous release's agents ran their rounds
// and left the newer keys (they remove only their own): the status key on
// the re-tainted node and the startup key on the node that joined. Doctor
// names each key on that node alone, says why, and prints the swap to the
// previous release's own taint of the same role.
func (e *env) strandedAfterRollback(t *testing.T) {
	t.Helper()
	n := e.c.WaitNode(t, e.victim, time.Second, "still carrying "+api.CAStatusTaintKey, func(n *corev1.Node) bool { return hasTaint(n, api.CAStatusTaintKey) })
	t.Logf("after the rollback node %s carries %v, label %s=%q", e.victim, n.Spec.Taints, verifiedLabel, n.Labels[verifiedLabel])
	rep, code := e.doctor(t)
	if code != kubectlplugin.ExitError {
		t.Errorf("doctor after the rollback: exit %d, want %d", code, kubectlplugin.ExitError)
	}
	want := map[string]struct{ node, own string }{
		api.CAStatusTaintKey:  {e.victim, api.UnhealthyTaint},
		api.CAStartupTaintKey: {e.joined, api.StartupTaint},
	}
	for _, s := range rep.StrandedTaints {
		w, ok := want[s.Key]
		if !ok {
			t.Errorf("doctor after the rollback names %s on %v as stranded; only %v are", s.Key, s.Nodes, want)
			continue
		}
		delete(want, s.Key)
		t.Logf("doctor after the rollback: %s taint %s on %v: stranded; fix: %s", s.Role, s.Key, s.Nodes, strings.Join(s.Fixes, "; or: "))
		swap := fmt.Sprintf("kubectl taint node %s --overwrite %s %s-", w.node, w.own, s.Key)
		if !slices.Equal(s.Nodes, []string{w.node}) || len(s.Fixes) == 0 || !strings.HasSuffix(s.Fixes[0], swap) ||
			!strings.Contains(s.Detail, "runs a release before the taint-key presets") {
			t.Errorf("doctor after the rollback: %+v; want node %s, the fix %q and why", s, w.node, swap)
		}
	}
	for key, w := range want {
		t.Errorf("doctor after the rollback does not name %s on %s: %+v", key, w.node, rep.StrandedTaints)
	}
}

// rollForward: the fault gone, helm upgrade to the working tree again: its
// agents remove the keys the rollback stranded (every real node verified,
// the one that joined with the new startup key among them), and doctor
// names no taint that no agent removes.
func (e *env) rollForward(t *testing.T) {
	e.setFault(t, e.victim, corev1.ConditionFalse)
	e.holdOut = nil
	e.roll(t, "roll-forward", e.newTag, "upgrade", release, e.newChart, "--namespace", namespace, "--values", e.newVals, "--wait", "--timeout", "3m")
	e.leaseHeldBy(t, e.newTag)
	for _, rn := range e.c.Nodes {
		e.c.WaitNode(t, rn.Name, time.Second, "no taint of ours", func(n *corev1.Node) bool {
			return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return harness.OurTaint(t.Key) })
		})
	}
	if rep, _ := e.doctor(t); len(rep.StrandedTaints) > 0 {
		t.Errorf("doctor after the roll forward names stranded taints: %+v", rep.StrandedTaints)
	}
	e.afterRoll(t, "after the roll forward")
}
