package app

import (
	"flag"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
)

func parse(t *testing.T, env map[string]string, args ...string) (Options, error) {
	t.Helper()
	o := NewOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for k, v := range env {
		t.Setenv(k, v)
	}
	if err := o.Parse(fs, args); err != nil {
		return *o, err
	}
	return *o, o.Validate()
}

func TestDefaultsAreValid(t *testing.T) {
	o, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.ListenAddress != ":8443" || o.MetricsAddress != ":8080" || o.Finalizer != "infra.894.io/node-cleanup" || o.CertMode != CertModeSelfManaged {
		t.Errorf("defaults = %+v", o)
	}
}

func TestEnvTwins(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		check func(Options) bool
	}{
		{"env sets", map[string]string{"KNR_WEBHOOK_CERT_SYNC_INTERVAL": "5s"}, nil, func(o Options) bool { return o.CertSyncInterval == 5*time.Second }},
		{"flag beats env", map[string]string{"KNR_WEBHOOK_FINALIZER": "a/b"}, []string{"--finalizer=c/d"}, func(o Options) bool { return o.Finalizer == "c/d" }},
		{"POD_NAMESPACE", map[string]string{"POD_NAMESPACE": "ops"}, nil, func(o Options) bool { return o.Namespace == "ops" }},
		{"KNR_WEBHOOK_NAMESPACE beats POD_NAMESPACE", map[string]string{"POD_NAMESPACE": "ops", "KNR_WEBHOOK_NAMESPACE": "infra"}, nil, func(o Options) bool { return o.Namespace == "infra" }},
		{"list", map[string]string{"KNR_WEBHOOK_EXTRA_SANS": "10.0.0.1, a.example"}, nil, func(o Options) bool {
			d, ips := o.SANs()
			return len(ips) == 1 && d[len(d)-1] == "a.example"
		}},
		{"ipv6 SANs are addresses", map[string]string{"KNR_WEBHOOK_EXTRA_SANS": "fd00::10,10.0.0.1"}, nil, func(o Options) bool {
			d, ips := o.SANs()
			return len(ips) == 2 && ips[0].Equal(net.ParseIP("fd00::10")) && !slices.Contains(d, "fd00::10")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("options = %+v", o)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"bad env value", map[string]string{"KNR_WEBHOOK_BACKFILL": "perhaps"}, nil, "KNR_WEBHOOK_BACKFILL"},
		{"unknown cert mode", nil, []string{"--cert-mode=magic"}, "--cert-mode"},
		{"files without files", nil, []string{"--cert-mode=files", "--tls-cert-file="}, "--tls-cert-file"},
		{"client CA in self-managed", nil, []string{"--client-ca=/x"}, "--client-ca"},
		{"renew fraction", nil, []string{"--cert-renew-before=1.5"}, "--cert-renew-before"},
		{"cert outlives CA", nil, []string{"--cert-validity=100h", "--ca-validity=10h"}, "--cert-validity"},
		{"unqualified finalizer", nil, []string{"--finalizer=x"}, "--finalizer"},
		{"no workers", nil, []string{"--backfill-workers=0"}, "--backfill-workers"},
		{"log level", nil, []string{"--log-level=loud"}, "--log-level"},
		{"zero cleanup deadline", nil, []string{"--cleanup-deadline=0s"}, "--cleanup-deadline: 0s must be positive"},
		{"negative cleanup deadline", nil, []string{"--cleanup-deadline=-5m"}, "--cleanup-deadline: -5m0s must be positive"},
		{"unknown remediation policy", nil, []string{"--remediation=delete"}, `--remediation: "delete" is not off, report or replace`},
		{"zero unverified deadline", nil, []string{"--remediation=report", "--unverified-deadline=0s"}, "--unverified-deadline: 0s must be positive"},
		{"negative unverified deadline", nil, []string{"--remediation=replace", "--unverified-deadline=-1m"}, "--unverified-deadline: -1m0s must be positive"},
		{"zero stall-after", nil, []string{"--remediation=replace", "--remediation-stall-after=0s"}, "--remediation-stall-after: 0s must be positive"},
		{"bad max-replacing", nil, []string{"--remediation=replace", "--max-replacing=0"}, "--max-replacing"},
		{"bad max-replacing share", nil, []string{"--remediation=replace", "--max-replacing=150%"}, "--max-replacing"},
		{"bad fleet budget", nil, []string{"--remediation=replace", "--agent-fleet-budget=many"}, "--agent-fleet-budget: "},
		{"bad taint key", nil, []string{"--remediation=replace", "--agent-startup-taint=not a key=true:NoSchedule"}, "--agent-startup-taint: "},
		{"bare taint key", nil, []string{"--remediation=replace", "--agent-unhealthy-taint=node-ready/unhealthy"}, "--agent-unhealthy-taint: "},
		{"bad taint effect", nil, []string{"--remediation=replace", "--agent-startup-taint=a/b=true:Sometimes"}, "--agent-startup-taint: "},
		{"bad label", nil, []string{"--remediation=replace", "--agent-verified-label=no way"}, "--agent-verified-label: "},
		{"bad old taint key names the old flag", nil, []string{"--remediation=replace", "--startup-taint=not a key"}, "-startup-taint"},
		{"bad skip annotation", nil, []string{"--skip-cleanup-annotation="}, "--skip-cleanup-annotation: "},
		{"remediation env twin", map[string]string{"KNR_WEBHOOK_REMEDIATION": "nuke"}, nil, "--remediation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.env, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// Every problem is reported at once, each in the form "--flag: problem".
func TestValidateReportsEveryProblemInOneForm(t *testing.T) {
	_, err := parse(t, nil, "--log-level=loud", "--max-body-bytes=1", "--remediation=replace", "--agent-fleet-budget=many")
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"--max-body-bytes: ", "--log-level: ", "--agent-fleet-budget: "}
	if len(lines) != len(want) {
		t.Fatalf("problems %q, want %d", lines, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d = %q, want it to start with %q", i, lines[i], w)
		}
	}
}

// A renamed flag keeps its old name for one release: set on the command
// line or by its old environment twin, it sets the new flag and is named
// once in Deprecations. No flag is renamed since 0.1.0: the test renames two
// to test-local old names.
func TestRenamedFlagsStillWorkAndWarn(t *testing.T) {
	defer func(saved []flagenv.Renamed) { renamedFlags = saved }(renamedFlags)
	renamedFlags = []flagenv.Renamed{{Old: "test-old-budget", New: "agent-fleet-budget"}, {Old: "test-old-metrics", New: "metrics-bind-address"}}
	o, err := parse(t, map[string]string{"KNR_WEBHOOK_TEST_OLD_BUDGET": "3"},
		"--remediation=replace", "--test-old-metrics=:9090", "--test-old-metrics=:9091")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := []string{o.FleetBudget, o.MetricsAddress}, []string{"3", ":9091"}; !slices.Equal(got, want) {
		t.Errorf("options %q, want %q", got, want)
	}
	warnings := o.Deprecations()
	for _, old := range []string{"test-old-budget", "test-old-metrics"} {
		n := 0
		for _, w := range warnings {
			if strings.Contains(w, "--"+old+" is deprecated") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings about --%s in %q, want 1", n, old, warnings)
		}
	}
	if len(warnings) != 2 {
		t.Errorf("%d warnings, want 2: %q", len(warnings), warnings)
	}
}

func TestNewFlagNamesDoNotWarn(t *testing.T) {
	o, err := parse(t, nil, "--remediation=replace", "--agent-startup-taint=example.com/new=yes:NoExecute", "--agent-fleet-budget=2")
	if err != nil || len(o.Deprecations()) != 0 || taintKey(o.StartupTaint) != "example.com/new" {
		t.Errorf("err %v, warnings %q, key %q; want none, none, example.com/new", err, o.Deprecations(), taintKey(o.StartupTaint))
	}
}

// TestUnverifiedDeadlineFollowsThePreset: unset, the deadline falls before
// Cluster Autoscaler's 15 min under its preset, and stays 30m otherwise; a
// given one wins, and one past 15 min under CA is warned about, once.
func TestUnverifiedDeadlineFollowsThePreset(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want time.Duration
		warn bool
	}{
		{name: "default preset", args: nil, want: 10 * time.Minute},
		{name: "karpenter", args: []string{"--autoscaler=karpenter"}, want: 30 * time.Minute},
		{name: "none", args: []string{"--autoscaler=none"}, want: 30 * time.Minute},
		{name: "given under CA, within its limit", args: []string{"--unverified-deadline=14m"}, want: 14 * time.Minute},
		{name: "given under CA, past its limit", args: []string{"--unverified-deadline=20m"}, want: 20 * time.Minute, warn: true},
		{name: "given past 15m under karpenter: no CA to warn about", args: []string{"--autoscaler=karpenter", "--unverified-deadline=1h"}, want: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, nil, append([]string{"--remediation=report"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if o.Deadline() != tt.want {
				t.Errorf("deadline %s, want %s", o.Deadline(), tt.want)
			}
			w := o.Warnings()
			warned := slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "--max-node-provision-time") })
			if warned != tt.warn || len(w) > 1 {
				t.Errorf("warnings %q, want the CA deadline warning: %v", w, tt.warn)
			}
		})
	}
}

func TestTaintFlagsValidated(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--autoscaler=gke", `--autoscaler: unknown preset "gke"`},
		{"--previous-taint-keys=a b", "--previous-taint-keys"},
		{"--agent-startup-taint=k=v", "--agent-startup-taint"},
		{"--unverified-deadline=0s", "--unverified-deadline: 0s must be positive"},
	} {
		if _, err := parse(t, nil, "--remediation=replace", tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestRemediationKnowsThePreviousKeys: the keys remediation judges nodes by
// are the preset's, then every other preset's and the user's.
func TestRemediationKnowsThePreviousKeys(t *testing.T) {
	o, err := parse(t, nil, "--remediation=report", "--previous-taint-keys=example.com/old")
	if err != nil {
		t.Fatal(err)
	}
	k, err := o.taintKeys()
	if err != nil {
		t.Fatal(err)
	}
	if taintKey(k.Startup) != api.CAStartupTaintKey || !slices.Contains(k.PreviousStartup, api.StartupTaintKey) ||
		!slices.Contains(k.PreviousStartup, "example.com/old") || !slices.Contains(k.PreviousUnhealthy, api.UnhealthyTaintKey) {
		t.Errorf("keys %+v", k)
	}
}

// TestResolveParsesOnce: Resolve hands remediation and admission's startup
// taint their configurations, parsed from the flags as validated.
func TestResolveParsesOnce(t *testing.T) {
	o, err := parse(t, nil, "--remediation=replace", "--mode=observe", "--autoscaler=karpenter", "--remediation-breaker-threshold=30%",
		"--inject-startup-taint", "--agent-placement={}")
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	r := c.Remediation
	if r == nil || r.Policy != remediate.PolicyReport || !c.ReplaceOnlyReports || r.Breaker.Threshold != 0.3 ||
		r.Deadline != api.DefaultUnverifiedDeadline(api.PresetKarpenter) || !slices.Contains(r.StartupTaints, api.KarpenterStartupTaintKey) {
		t.Errorf("remediation = %+v, replace only reports %v; want report (observe), threshold 0.3, Karpenter's deadline and key", r, c.ReplaceOnlyReports)
	}
	if s := c.StartupTaint; s == nil || s.Startup.Key != api.KarpenterStartupTaintKey || !s.Observe {
		t.Errorf("startup taint = %+v, want Karpenter's key, observed", s)
	}
	o, err = parse(t, nil, "--remediation=off")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := o.Resolve(); err != nil || c.Remediation != nil || c.StartupTaint != nil {
		t.Errorf("off: %+v, %v; want neither remediation nor injection", c, err)
	}
}
