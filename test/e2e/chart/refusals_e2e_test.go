//go:build e2e

package chart_test

import (
	"strings"
	"testing"
)

// refusedRelease is never installed: every value it is given is refused.
const refusedRelease = "refused"

// refusedEverywhere checks that helm template, install and upgrade --install
// all refuse the values sets before anything reaches the cluster, and that
// each says every string of want (the value set, why, and the fix).
func refusedEverywhere(t *testing.T, sets []string, want ...string) {
	t.Helper()
	var flags []string
	for _, s := range sets {
		flags = append(flags, "--set", s)
	}
	for _, cmd := range [][]string{
		{"template", refusedRelease, chart, "-n", namespace, "--kube-version", "1.36.0"},
		{"install", refusedRelease, chart, "-n", namespace, "--create-namespace"},
		{"upgrade", "--install", refusedRelease, chart, "-n", namespace, "--create-namespace"},
	} {
		out, err := helm(t, append(cmd, flags...)...)
		if err == nil {
			t.Errorf("helm %s %v: accepted, want refused", cmd[0], sets)
			continue
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("helm %s %v refuses without saying %q:\n%s", cmd[0], sets, w, out)
			}
		}
	}
	if out, err := helm(t, "status", refusedRelease, "-n", namespace); err == nil {
		t.Errorf("release %s exists after refused installs:\n%s", refusedRelease, out)
	}
}

// TestChartRefusesFailurePolicyFail: admission must never block a kubelet's
// registration of its Node, so the chart renders no MutatingWebhookConfiguration
// with any failure policy but Ignore; the refusal names the value set and
// why.
func TestChartRefusesFailurePolicyFail(t *testing.T) {
	why := "refuse the kubelets' registration of new nodes"
	for _, tc := range []struct {
		sets []string
		said string
	}{
		{[]string{"webhook.failurePolicy=Fail"}, "webhook.failurePolicy=Fail is refused"},
		// Without the key the API server would default the policy to Fail.
		{[]string{"webhook.failurePolicy=null"}, "webhook.failurePolicy is unset (null), and the API server's default is Fail"},
		{[]string{"webhook.failurePolicy=ignore"}, "webhook.failurePolicy=ignore is refused"},
		// Refused whatever else is set, so turning cleanup back on later
		// cannot bring a Fail policy with it.
		{[]string{"webhook.failurePolicy=Fail", "webhook.cleanup.enabled=false", "webhook.backfill=false"}, "webhook.failurePolicy=Fail is refused"},
	} {
		t.Run(strings.Join(tc.sets, ","), func(t *testing.T) {
			refusedEverywhere(t, tc.sets, tc.said, why, "only Ignore is accepted", "webhook.failurePolicy=Ignore")
		})
	}
	out, err := helm(t, "template", release, chart, "-n", namespace, "--kube-version", "1.36.0",
		"--set", "webhook.failurePolicy=Ignore", "--show-only", "templates/webhook-mutatingwebhookconfiguration.yaml")
	if err != nil {
		t.Fatalf("helm template --set webhook.failurePolicy=Ignore: %v\n%s", err, out)
	}
	if !strings.Contains(out, "failurePolicy: Ignore\n") {
		t.Errorf("the MutatingWebhookConfiguration is not rendered with failurePolicy: Ignore:\n%s", out)
	}
}

// TestChartRefusesPublishModeTaints: in publish mode a NodeReadinessRule
// owns the taint, so the chart refuses the two values that would make
// kube-node-ready taint anyway: the hold after a reboot (a taint the agent
// adds), and admission's startup taint under a key no rule can own (the
// agent in publish mode removes our keys outside readiness.k8s.io/, and a
// rule's key must start with it). With a readiness.k8s.io/ key, injection
// renders.
func TestChartRefusesPublishModeTaints(t *testing.T) {
	refusedEverywhere(t, []string{"mode=publish", "agent.reverifyAfterReboot=true"},
		"agent.reverifyAfterReboot is refused with mode publish", "agent.reverifyAfterReboot=false")
	refusedEverywhere(t, []string{"mode=publish", "webhook.startupTaint.injectInPublishMode=true"},
		"webhook.startupTaint.injectInPublishMode=true is refused with the startup taint key startup-taint.cluster-autoscaler.kubernetes.io/node-ready",
		"readiness.k8s.io/", "webhook.startupTaint.injectInPublishMode=false")
	out, err := helm(t, "template", release, chart, "-n", namespace, "--kube-version", "1.36.0",
		"--set", "mode=publish", "--set", "autoscaler=karpenter", "--set", "webhook.startupTaint.injectInPublishMode=true")
	if err != nil || !strings.Contains(out, "--inject-startup-taint=true") {
		t.Errorf("mode publish, a readiness.k8s.io/ key, injectInPublishMode: %v, injection rendered: %v", err, strings.Contains(out, "--inject-startup-taint=true"))
	}
}
