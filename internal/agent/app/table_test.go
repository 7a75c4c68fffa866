package app

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

func parsed(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := o.Parse(fs, append([]string{"--node-name=n1"}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return o
}

// resolved is the Config of parsed options.
func resolved(t *testing.T, args ...string) *Config {
	t.Helper()
	c, err := parsed(t, args...).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGatesAreRowsOfTheCheckTable: the agent builds checks and gates from
// one table, in its order, each gate enabled by its own flags; the check
// command builds the checks alone.
func TestGatesAreRowsOfTheCheckTable(t *testing.T) {
	if !slices.Equal(AllChecks, []string{"dns", "api", "network", "discovery", "probe"}) || !slices.Equal(Gates, []string{GateConditions, GateDaemonSets, GateCSIDrivers, GateExtendedResources, GateDRA}) {
		t.Fatalf("checks %v, gates %v", AllChecks, Gates)
	}
	client := agent.Clientset{CS: fake.NewClientset()} // nothing is sent while building
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name       string
		args       []string
		want       []string
		wantChecks []string
	}{
		{name: "defaults: the DaemonSet gate is on",
			want: []string{"dns", "api", "network", "discovery", GateDaemonSets}, wantChecks: []string{"dns", "api", "network", "discovery"}},
		{name: "both gates, in the table's order",
			args: []string{"--checks=api,dns", "--require-conditions=Ready=True"},
			want: []string{"dns", "api", GateConditions, GateDaemonSets}, wantChecks: []string{"dns", "api"}},
		{name: "the resource gates, each on by its own flag",
			args: []string{"--checks=api", "--gate.daemonsets=false", "--gate.dra=gpu.example.com", "--gate.csidrivers=ebs.csi.aws.com", "--gate.extendedresources=nvidia.com/gpu"},
			want: []string{"api", GateCSIDrivers, GateExtendedResources, GateDRA}, wantChecks: []string{"api"}},
		{name: "gates off",
			args: []string{"--checks=api", "--gate.daemonsets=false"},
			want: []string{"api"}, wantChecks: []string{"api"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := resolved(t, tt.args...)
			all, _, err := Build(t.Context(), c, client, log)
			if err != nil {
				t.Fatal(err)
			}
			if got := checkNames(all); !slices.Equal(got, tt.want) {
				t.Errorf("Build = %v, want %v", got, tt.want)
			}
			for _, c := range all {
				if _, isGate := c.(checks.Gate); isGate != slices.Contains(Gates, c.Name()) {
					t.Errorf("%s: implements checks.Gate = %v", c.Name(), isGate)
				}
			}
			only, err := BuildChecks(c, client, log)
			if err != nil {
				t.Fatal(err)
			}
			if got := checkNames(only); !slices.Equal(got, tt.wantChecks) {
				t.Errorf("BuildChecks = %v, want %v", got, tt.wantChecks)
			}
		})
	}
}

func checkNames(cs []checks.Check) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return out
}

// TestConfigPreset: --autoscaler picks the taints; an explicit taint wins.
func TestConfigPreset(t *testing.T) {
	cfg := resolved(t, "--autoscaler=karpenter", "--unhealthy-taint=example.com/sick:NoSchedule").Agent
	if cfg.Taints.Startup.Key != api.KarpenterStartupTaintKey || cfg.Taints.Startup.Value != "true" || cfg.Taints.Startup.Effect != "NoSchedule" ||
		cfg.Taints.Unhealthy.Key != "example.com/sick" {
		t.Errorf("Taints = %+v", cfg.Taints)
	}
	if !slices.Contains(cfg.Taints.PreviousStartup, api.CAStartupTaintKey) || slices.Contains(cfg.Taints.PreviousStartup, api.KarpenterStartupTaintKey) {
		t.Errorf("previous startup keys = %v: want the other presets' keys, not the configured one", cfg.Taints.PreviousStartup)
	}
}

// TestConfig: the loop's configuration carries the parsed flags.
func TestConfig(t *testing.T) {
	cfg := resolved(t, "--continuous-checks=api,daemonsets", "--unhealthy-taint=example.com/sick:NoExecute",
		"--fleet-budget=2", "--check-period=30s", "--retaint-threshold=4", "--skip-verification-annotation=example.com/skip",
		"--previous-taint-keys=example.com/old").Agent
	if !slices.Equal(cfg.Continuous, []string{"api", GateDaemonSets}) {
		t.Errorf("Continuous = %v", cfg.Continuous)
	}
	if cfg.Taints.Unhealthy.Key != "example.com/sick" || cfg.Taints.Unhealthy.Effect != "NoExecute" || cfg.Taints.Startup.Key != api.CAStartupTaintKey {
		t.Errorf("Taints = %+v", cfg.Taints)
	}
	if want := []string{api.KarpenterStartupTaintKey, api.StartupTaintKey, "example.com/old"}; !slices.Equal(cfg.Taints.PreviousStartup, want) {
		t.Errorf("previous startup keys = %v, want %v", cfg.Taints.PreviousStartup, want)
	}
	if want := []string{api.CAStatusTaintKey, api.UnhealthyTaintKey}; !slices.Equal(cfg.Taints.PreviousUnhealthy, want) {
		t.Errorf("previous unhealthy keys = %v, want %v (the configured one left out)", cfg.Taints.PreviousUnhealthy, want)
	}
	if cfg.FleetBudget.Limit(100) != 2 || cfg.FleetBudgetFlag != "--fleet-budget=2" {
		t.Errorf("fleet budget %d of 100, named %q", cfg.FleetBudget.Limit(100), cfg.FleetBudgetFlag)
	}
	if cfg.Period != 30*time.Second || cfg.Thresholds.Retaint != 4 || cfg.BypassAnnotation != "example.com/skip" || cfg.LeaseNamespace != "kube-node-ready" {
		t.Errorf("Config = %+v", cfg)
	}
}

// TestPrintRound is the check command's table.
func TestPrintRound(t *testing.T) {
	var b bytes.Buffer
	r := checks.Round{Duration: 1200 * time.Millisecond, Results: []checks.Result{
		{Name: "dns", Duration: 300 * time.Millisecond},
		{Name: "api", Duration: 1200 * time.Millisecond, Err: errors.New("api: get node:\nforbidden")},
	}}
	if err := PrintRound(&b, r); err != nil {
		t.Fatal(err)
	}
	want := `CHECK  RESULT  DURATION  ERROR
dns    pass    300ms     
api    FAIL    1.2s      api: get node: forbidden

round took 1.2s: FAILED: api
`
	if b.String() != want {
		t.Errorf("PrintRound =\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := PrintRound(&b, checks.Round{Results: []checks.Result{{Name: "dns"}}}); err != nil || !strings.HasSuffix(b.String(), "all checks passed\n") {
		t.Errorf("passing round printed %q (%v)", b.String(), err)
	}
}
