//go:build e2e

package chart_test

import (
	"regexp"
	"strings"
	"testing"
)

// ipv4Literal matches a dotted-quad address or CIDR.
var ipv4Literal = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}\b`)

// bindFlag matches an address flag the binaries listen on.
var bindFlag = regexp.MustCompile(`--(?:metrics-bind|listen)-address=(\S*)`)

// TestChartAssumesNoIPFamily: the rendered chart, with every option that
// adds objects, names no IPv4 address or CIDR, every listener takes every
// family (":port", never "0.0.0.0:port"), and the agent's IP families are
// the cluster's unless agent.ipFamilies says otherwise; so one chart serves
// IPv4, IPv6 single-stack and dual-stack clusters.
func TestChartAssumesNoIPFamily(t *testing.T) {
	all := []string{"--set", "networkPolicy.enabled=true", "--set", "monitoring.serviceMonitor.enabled=true",
		"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.grafanaDashboard.enabled=true"}
	for _, tc := range []struct {
		name, want string
		sets       []string
	}{
		{name: "defaults", want: "--ip-families=auto"},
		{name: "every option", want: "--ip-families=auto", sets: all},
		{name: "ipv6 chosen", want: "--ip-families=ipv6", sets: []string{"--set", "agent.ipFamilies=ipv6"}},
		{name: "dual-stack chosen", want: "--ip-families=ipv4,ipv6", sets: []string{"--set-string", `agent.ipFamilies=ipv4\,ipv6`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(t, append([]string{"template", release, chart, "-n", namespace, "--kube-version", "1.36.0"}, tc.sets...)...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			if m := ipv4Literal.FindAllString(out, -1); len(m) > 0 {
				t.Errorf("the chart names IPv4 addresses %q", m)
			}
			binds := bindFlag.FindAllStringSubmatch(out, -1)
			if len(binds) < 3 {
				t.Errorf("%d listen addresses rendered, want the agent's and the webhook's two", len(binds))
			}
			for _, b := range binds {
				if !strings.HasPrefix(b[1], ":") {
					t.Errorf("%s listens on one host, not on every family", b[0])
				}
			}
			if !strings.Contains(out, "- "+tc.want+"\n") {
				t.Errorf("the agent is not given %s", tc.want)
			}
		})
	}
	out, err := helm(t, "template", release, chart, "-n", namespace, "--kube-version", "1.36.0", "--set", "agent.ipFamilies=ipv5")
	if err == nil || !strings.Contains(out, "ipFamilies") {
		t.Errorf("helm template --set agent.ipFamilies=ipv5: err=%v, want a schema error naming ipFamilies:\n%s", err, out)
	}
}
