package doctor

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/golden"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// nrcRule is a NodeReadinessRule keyed key that names conditions.
func nrcRule(name, key string, conditions ...string) ReadinessRule {
	return ReadinessRule{Name: name, Taint: Taint{Key: key, Value: "true", Effect: "NoSchedule"}, Conditions: conditions, EnforcementMode: "continuous"}
}

// withAgentArgs adds args to the agent container of f's DaemonSet.
func withAgentArgs(f *fakeAPI, args ...string) *fakeAPI {
	c := &f.daemonSets[0].Spec.Template.Spec.Containers[0]
	c.Args = append(c.Args, args...)
	return f
}

// TestGoldenDoctorReadinessRules: doctor names a NodeReadinessRule keyed
// readiness.k8s.io/node-ready, or with our startup key, as adopting our
// taint: a problem in enforce mode, with the two fixes (a key of its own,
// or publish mode); advice in publish mode, where it says when the rule
// names none of our conditions. A rule with a key of its own is not named.
func TestGoldenDoctorReadinessRules(t *testing.T) {
	rules := []ReadinessRule{
		nrcRule("cni", "readiness.k8s.io/network-not-ready", "example.com/CNIReady"),
		nrcRule("gpu", api.KarpenterStartupTaintKey, "example.com/GPUReady"),
		nrcRule("kube-node-ready", "readiness.k8s.io/kube-node-ready", api.ConditionType),
	}
	for _, tt := range []struct {
		file     string
		fake     *fakeAPI
		wantCode int
	}{
		{"doctor-nrc-enforce.txt", func() *fakeAPI {
			f := doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, nil)
			f.nrc, f.rules = true, rules
			return f
		}(), ExitError},
		{"doctor-nrc-karpenter.txt", func() *fakeAPI {
			f := withAgentArgs(doctorFake(readiness, workloadtest.CAStatusTaint, nil), "--mode=observe")
			f.nrc, f.rules = true, rules
			return f
		}(), ExitError},
		{"doctor-nrc-publish.txt", func() *fakeAPI {
			f := withAgentArgs(doctorFake("readiness.k8s.io/kube-node-ready=true:NoSchedule", workloadtest.CAStatusTaint, nil), "--mode=publish")
			f.nrc, f.rules = true, rules
			return f
		}(), ExitOK},
	} {
		t.Run(tt.file, func(t *testing.T) {
			code, out, errOut, _ := run(tt.fake, "", "doctor")
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.wantCode, errOut)
			}
			golden.Compare(t, tt.file, []byte(out))
		})
	}
}

// TestDoctorSaysWhoIsHeldAfterAReboot: with --reverify-after-reboot doctor
// says so and names the nodes held now; without, it says nothing of it.
func TestDoctorSaysWhoIsHeldAfterAReboot(t *testing.T) {
	modes := agent.CheckModes{Continuous: []string{"dns"}}
	held := node("rebooted", []corev1.Taint{{Key: api.CAStartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		withCondition(agent.RebootHeldCondition([]string{"dns"}, time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC), modes)))
	ok := node("fine", nil, withCondition(agent.PassingCondition(modes)))
	f := withAgentArgs(doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, nil), "--reverify-after-reboot=true")
	for _, n := range []corev1.Node{held, ok} {
		f.nodes[n.Name] = &n
	}
	_, out, _, _ := run(f, "", "doctor")
	if !strings.Contains(out, "after a reboot:   a node is held with the startup taint until it verifies again (--reverify-after-reboot); 1 held now (condition reason Rebooted): rebooted\n") {
		t.Errorf("doctor does not name the node held after a reboot:\n%s", out)
	}
	_, out, _, _ = run(doctorFake(workloadtest.CAStartupTaint, workloadtest.CAStatusTaint, nil), "", "doctor")
	if strings.Contains(out, "after a reboot") {
		t.Errorf("doctor speaks of reboots without the flag:\n%s", out)
	}
}

// withCondition gives a node the agent's condition c.
func withCondition(c agent.ConditionState) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: agent.ConditionType, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
}
