package doctor

import "testing"

// TestHelmUpgradeNamesThePublishedChart: the helm fixes name the published
// chart at the deployed version, so they run from any directory, and quote
// what a shell would expand.
func TestHelmUpgradeNamesThePublishedChart(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   Install
		sets []string
		want string
	}{
		{"deployed version", Install{Release: "knr", Namespace: "ops", ChartVersion: "0.1.0"}, []string{"autoscaler=karpenter", "agent.startupTaint.key="},
			"helm upgrade knr oci://ghcr.io/kube-node-ready/charts/kube-node-ready --version 0.1.0 --namespace ops --reset-then-reuse-values --set autoscaler=karpenter --set agent.startupTaint.key="},
		{"version unknown: the newest", Install{Release: "knr", Namespace: "ops"}, nil,
			"helm upgrade knr oci://ghcr.io/kube-node-ready/charts/kube-node-ready --namespace ops --reset-then-reuse-values"},
		{"a list is quoted against brace expansion", Install{Release: "knr", Namespace: "ops", ChartVersion: "1.2.0-rc.1"}, []string{"agent.previousTaintKeys={a/b,c/d}"},
			"helm upgrade knr oci://ghcr.io/kube-node-ready/charts/kube-node-ready --version 1.2.0-rc.1 --namespace ops --reset-then-reuse-values --set 'agent.previousTaintKeys={a/b,c/d}'"},
	} {
		if got := HelmUpgrade(tt.in, tt.sets...); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}
