package app

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

func TestValidateNamesTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "missing node", args: nil, want: "--node-name: required"},
		{name: "unknown check", args: []string{"--node-name=n", "--checks=dns,ping"}, want: `--checks: unknown check "ping"`},
		{name: "negative period", args: []string{"--node-name=n", "--check-period=-5s"}, want: "--check-period: must be positive"},
		{name: "bad budget", args: []string{"--node-name=n", "--fleet-budget=0"}, want: "--fleet-budget"},
		{name: "bad taint", args: []string{"--node-name=n", "--startup-taint=x"}, want: "--startup-taint"},
		{name: "jitter too big", args: []string{"--node-name=n", "--check-jitter=1.5"}, want: "--check-jitter"},
		{name: "bad dns server", args: []string{"--node-name=n", "--check.dns.server=10.0.0.10"}, want: "--check.dns.server"},
		{name: "bad service ref", args: []string{"--node-name=n", "--check.discovery.service=kube-dns"}, want: "--check.discovery.service"},
		{name: "bad ip family", args: []string{"--node-name=n", "--ip-families=ipv4,ipv5"}, want: "--ip-families"},
		{name: "ip family twice", args: []string{"--node-name=n", "--ip-families=ipv6,ipv6"}, want: "--ip-families"},
		{name: "bad log level", args: []string{"--node-name=n", "--log-level=loud"}, want: "--log-level"},
		{name: "unknown continuous check", args: []string{"--node-name=n", "--continuous-checks=ping"}, want: `--continuous-checks: unknown check "ping"`},
		{name: "continuous check not enabled", args: []string{"--node-name=n", "--checks=dns,api", "--continuous-checks=network"}, want: `--continuous-checks: check "network" is not enabled`},
		{name: "all with names", args: []string{"--node-name=n", "--continuous-checks=all,dns"}, want: `--continuous-checks: "all" stands alone`},
		{name: "unknown autoscaler", args: []string{"--node-name=n", "--autoscaler=gke"}, want: `--autoscaler: unknown preset "gke" (known: cluster-autoscaler, karpenter, none)`},
		{name: "bad previous taint key", args: []string{"--node-name=n", "--previous-taint-keys=a b"}, want: "--previous-taint-keys"},
		{name: "bad unhealthy taint", args: []string{"--node-name=n", "--unhealthy-taint=x:Never"}, want: "--unhealthy-taint"},
		{name: "bad bypass annotation", args: []string{"--node-name=n", "--skip-verification-annotation=a b"}, want: "--skip-verification-annotation"},
		{name: "zero recover threshold", args: []string{"--node-name=n", "--recover-threshold=0"}, want: "--recover-threshold: must be at least 1"},
		{name: "unknown condition syntax", args: []string{"--node-name=n", "--require-conditions=Ready"}, want: `--require-conditions: condition "Ready": want Type=Status`},
		{name: "bad condition status", args: []string{"--node-name=n", "--require-conditions=Ready=yes"}, want: `--require-conditions: condition "Ready=yes"`},
		{name: "bad absent mode", args: []string{"--node-name=n", "--require-conditions.absent=maybe"}, want: "--require-conditions.absent"},
		{name: "bad exclusion", args: []string{"--node-name=n", "--gate.daemonsets.exclude=cilium"}, want: `--gate.daemonsets.exclude: exclusion "cilium"`},
		{name: "bad exclude selector", args: []string{"--node-name=n", "--gate.daemonsets.exclude-selector=a in (b"}, want: "--gate.daemonsets.exclude-selector"},
		{name: "gate not enabled but continuous", args: []string{"--node-name=n", "--continuous-checks=conditions"}, want: `--continuous-checks: check "conditions" is not enabled`},
		{name: "malformed probe URL", args: []string{"--node-name=n", "--checks=dns,probe", "--check.probe.targets=http://[::1"}, want: "--check.probe.targets"},
		{name: "probe without targets", args: []string{"--node-name=n", "--checks=dns,probe"}, want: "--check.probe.targets: the probe check is enabled but has no target"},
		{name: "reverify with one key for both taints", args: []string{"--node-name=n", "--reverify-after-reboot", "--unhealthy-taint=node-ready/unverified=true:NoSchedule", "--startup-taint=node-ready/unverified=true:NoSchedule"}, want: "--reverify-after-reboot: needs an --unhealthy-taint with another key"},
		{name: "targets without probe", args: []string{"--node-name=n", "--check.probe.targets=tcp://127.0.0.1:9"}, want: "add probe to --checks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			if err := o.Parse(fs, tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	o := NewOptions()
	o.NodeName = "node-1"
	if err := o.Validate(); err != nil {
		t.Errorf("defaults with a node name are invalid: %v", err)
	}
}

func TestContinuousChecks(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		continuous []string
	}{
		{name: "default: every enabled check", args: nil, continuous: []string{"dns", "api", "network", "discovery"}},
		{name: "default with fewer checks", args: []string{"--checks=dns,api"}, continuous: []string{"dns", "api"}},
		{name: "some", args: []string{"--continuous-checks=api"}, continuous: []string{"api"}},
		{name: "empty: bootstrap-only", args: []string{"--continuous-checks="}, continuous: nil},
		{name: "all leaves gates bootstrap", args: []string{"--require-conditions=Ready=True"}, continuous: []string{"dns", "api", "network", "discovery"}},
		{name: "a gate named is continuous", args: []string{"--require-conditions=Ready=True", "--continuous-checks=api,conditions"}, continuous: []string{"api", "conditions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			if err := o.Parse(fs, append([]string{"--node-name=n"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range o.Enabled() {
				if o.Continuous(c) {
					got = append(got, c)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.continuous, ",") {
				t.Errorf("continuous = %v, want %v", got, tt.continuous)
			}
		})
	}
	t.Run("environment twin, empty", func(t *testing.T) {
		t.Setenv("KNR_AGENT_CONTINUOUS_CHECKS", "")
		o := NewOptions()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		if err := o.Parse(fs, []string{"--node-name=n"}); err != nil {
			t.Fatal(err)
		}
		if o.Continuous("dns") {
			t.Errorf("KNR_AGENT_CONTINUOUS_CHECKS= set: dns still continuous (%v)", o.ContinuousChecks)
		}
	})
}

// TestRenamedFlagsStillWork: a renamed flag's old name, on the command line
// or as its environment twin, still sets the flag, and the agent is told to
// warn about it once. No flag is renamed since 0.1.0: the test renames
// --fleet-budget to a test-local old name.
func TestRenamedFlagsStillWork(t *testing.T) {
	defer func(saved []flagenv.Renamed) { renamedFlags = saved }(renamedFlags)
	renamedFlags = []flagenv.Renamed{{Old: "test-old-budget", New: "fleet-budget"}}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		got  func(*Options) string
		want string
		warn string
	}{
		{name: "--test-old-budget", args: []string{"--test-old-budget=3"},
			got: func(o *Options) string { return o.FleetBudget }, want: "3", warn: "--fleet-budget"},
		{name: "KNR_AGENT_TEST_OLD_BUDGET", env: map[string]string{"KNR_AGENT_TEST_OLD_BUDGET": "25%"},
			got: func(o *Options) string { return o.FleetBudget }, want: "25%", warn: "--fleet-budget"},
		{name: "KNR_AGENT_TEST_OLD_BUDGET given twice, warned once", env: map[string]string{"KNR_AGENT_TEST_OLD_BUDGET": "2"},
			args: []string{"--test-old-budget=5"},
			got:  func(o *Options) string { return o.FleetBudget }, want: "5", warn: "--fleet-budget"},
		{name: "new names: no warning", env: map[string]string{"KNR_AGENT_FLEET_BUDGET": "4"},
			got: func(o *Options) string { return o.FleetBudget }, want: "4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			o := NewOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			if err := o.Parse(fs, append([]string{"--node-name=n"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := tt.got(o); got != tt.want {
				t.Errorf("value = %q, want %q", got, tt.want)
			}
			warnings := o.Deprecations()
			switch {
			case tt.warn == "" && len(warnings) > 0:
				t.Errorf("warnings %q for new flag names", warnings)
			case tt.warn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], "use "+tt.warn)):
				t.Errorf("warnings %q, want one naming %s", warnings, tt.warn)
			}
		})
	}
}
