package webhook

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
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
		{"zero cleanup deadline", nil, []string{"--cleanup-deadline=0s"}, "--cleanup-deadline 0s must be positive"},
		{"negative cleanup deadline", nil, []string{"--cleanup-deadline=-5m"}, "--cleanup-deadline -5m0s must be positive"},
		{"unknown remediation policy", nil, []string{"--remediation=delete"}, `--remediation "delete" is not off, report or replace`},
		{"zero unverified deadline", nil, []string{"--remediation=report", "--unverified-deadline=0s"}, "--unverified-deadline 0s must be positive"},
		{"negative unverified deadline", nil, []string{"--remediation=replace", "--unverified-deadline=-1m"}, "--unverified-deadline -1m0s must be positive"},
		{"bad max-replacing", nil, []string{"--remediation=replace", "--max-replacing=0"}, "--max-replacing"},
		{"bad max-replacing share", nil, []string{"--remediation=replace", "--max-replacing=150%"}, "--max-replacing"},
		{"bad fleet budget", nil, []string{"--remediation=replace", "--fleet-budget=many"}, "--fleet-budget"},
		{"bad taint key", nil, []string{"--remediation=replace", "--startup-taint=not a key"}, "--startup-taint"},
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
