package app

import (
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// No combination of flags adds a finalizer that this process, or the
// finalizer names it knows, never removes.
func TestValidateRefusesAStrandedFinalizer(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string // "" means valid
	}{
		{"back-fill without cleanup", []string{"--cleanup=false"}, "--backfill: adds --finalizer"},
		{"admission-only replica", []string{"--cleanup=false", "--backfill=false"}, ""},
		{"legacy name equal to the finalizer", []string{"--legacy-finalizers=infra.894.io/node-cleanup"}, "--legacy-finalizers"},
		{"unqualified legacy name", []string{"--legacy-finalizers=old"}, "--legacy-finalizers"},
		{"no real attempt before the deadline", []string{"--cleanup-deadline=10m", "--cleanup-deadline-min-attempts=0"}, "--cleanup-deadline-min-attempts"},
		{"negative cleanup wait", []string{"--cleanup-wait=-1s"}, "--cleanup-wait"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, nil, tt.args...)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%v: %v, want valid", tt.args, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("%v: %v, want an error naming %s", tt.args, err, tt.want)
			}
		})
	}
}

// TestLegacyFinalizersAreOnlyOurs: back-fill strips every legacy name from
// every live node, so --legacy-finalizers accepts only the names this
// project shipped (api.ShippedFinalizers); another controller's finalizer,
// or any name of our own making, is refused with the value and the
// accepted names in the error.
func TestLegacyFinalizersAreOnlyOurs(t *testing.T) {
	const renamed = "example.com/renamed-cleanup"
	for _, name := range api.ShippedFinalizers() {
		t.Run("shipped "+name, func(t *testing.T) {
			// A shipped name is legacy once --finalizer is another.
			if _, err := parse(t, nil, "--finalizer="+renamed, "--legacy-finalizers="+name); err != nil {
				t.Errorf("--legacy-finalizers=%s: %v, want valid", name, err)
			}
			if _, err := parse(t, map[string]string{"KNR_WEBHOOK_LEGACY_FINALIZERS": name}, "--finalizer="+renamed); err != nil {
				t.Errorf("KNR_WEBHOOK_LEGACY_FINALIZERS=%s: %v, want valid", name, err)
			}
		})
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		bad  string
	}{
		{"Karpenter's termination finalizer", []string{"--legacy-finalizers=karpenter.sh/termination"}, nil, "karpenter.sh/termination"},
		{"a Kubernetes finalizer", []string{"--legacy-finalizers=kubernetes.io/pv-protection"}, nil, "kubernetes.io/pv-protection"},
		{"a name never shipped", []string{"--legacy-finalizers=example.com/old"}, nil, "example.com/old"},
		{"one bad name among ours", []string{"--finalizer=" + renamed, "--legacy-finalizers=" + api.Finalizer + ",karpenter.sh/termination"}, nil, "karpenter.sh/termination"},
		{"through the environment", nil, map[string]string{"KNR_WEBHOOK_LEGACY_FINALIZERS": "karpenter.sh/termination"}, "karpenter.sh/termination"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.env, tt.args...)
			if err == nil {
				t.Fatalf("%v %v: valid, want refused", tt.args, tt.env)
			}
			msg := err.Error()
			for _, want := range []string{"--legacy-finalizers", `"` + tt.bad + `"`, "not a finalizer name kube-node-ready shipped", "accepted: " + api.ShippedFinalizersText()} {
				if !strings.Contains(msg, want) {
					t.Errorf("%v %v: error %q does not say %q", tt.args, tt.env, msg, want)
				}
			}
		})
	}
}
