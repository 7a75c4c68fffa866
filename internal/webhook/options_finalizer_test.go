package webhook

import (
	"strings"
	"testing"
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
		{"legacy names", []string{"--legacy-finalizers=example.com/old,example.com/older"}, ""},
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
