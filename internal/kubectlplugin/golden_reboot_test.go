package kubectlplugin

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/golden"
)

// rebootNodes are a node the agent holds after a reboot
// (--reverify-after-reboot) and, in observe mode, one enforce would hold,
// beside a node verified under its boot.
func rebootNodes() []corev1.Node {
	held := agent.RebootHeldCondition([]string{"daemonsets"}, since, agent.CheckModes{Continuous: []string{"dns"}, Bootstrap: []string{"daemonsets"}})
	m, _ := api.ParseConditionMessage(held.Message)
	m.Boot = "0b1f0e2a-aaaa-4a1e-9d55-000000000001"
	held.Message = m.String()
	would := api.ConditionMessage{Summary: "observe mode: rebooted since verified (boot ID changed): enforce would hold the node with the startup taint until every check and gate passes again",
		Failing: []string{"dns"}, Since: since, HasModes: true, Continuous: []string{"dns"}, Boot: m.Boot}
	ok := agent.PassingCondition(modes)
	return []corev1.Node{
		testNode("reboot-held", "false", []corev1.Taint{startupTaint}, condition(held)),
		testNode("reboot-observed", "true", nil, condition(agent.ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonWouldHoldAfterReboot, Message: would.String()})),
		testNode("reboot-verified", "true", nil, condition(ok)),
	}
}

// TestGoldenReboot: status and why say that a node is held after a reboot
// (reason Rebooted), or in observe mode would be (WouldHoldAfterReboot),
// with the boot it was verified under and what still fails.
func TestGoldenReboot(t *testing.T) {
	nodes := rebootNodes()
	var buf bytes.Buffer
	if err := PrintStatus(&buf, Reports(nodes, PresetTaintKeys()), true, now); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "status-reboot.txt", buf.Bytes())
	for _, tt := range []struct {
		file string
		node corev1.Node
	}{{"why-rebooted.txt", nodes[0]}, {"why-would-hold-after-reboot.txt", nodes[1]}} {
		why := Why{Report: Report(&tt.node, PresetTaintKeys()), Keys: PresetTaintKeys(), EventsScope: "all namespaces"}
		var buf bytes.Buffer
		if err := PrintWhy(&buf, why, now); err != nil {
			t.Fatal(err)
		}
		golden.Compare(t, tt.file, buf.Bytes())
	}
}

// TestGoldenWhyVerifying: why words publish mode's Verifying condition.
func TestGoldenWhyVerifying(t *testing.T) {
	n := testNode("publish-new", "", []corev1.Taint{{Key: "readiness.k8s.io/kube-node-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		condition(agent.VerifyingCondition([]string{"daemonsets"}, since, modes)))
	why := Why{Report: Report(&n, PresetTaintKeys()), Keys: PresetTaintKeys(), EventsScope: "all namespaces"}
	var buf bytes.Buffer
	if err := PrintWhy(&buf, why, now); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "why-verifying.txt", buf.Bytes())
}
