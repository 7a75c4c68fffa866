package cli

import (
	"reflect"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

func TestTaintFlagsResolve(t *testing.T) {
	tests := []struct {
		name    string
		flags   TaintFlags
		want    TaintKeys
		wantErr bool
	}{
		{name: "cluster-autoscaler preset", flags: TaintFlags{Autoscaler: "cluster-autoscaler"}, want: TaintKeys{
			Startup:           "startup-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule",
			Unhealthy:         "status-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule",
			PreviousStartup:   []string{"readiness.k8s.io/node-ready", "node-ready/unverified"},
			PreviousUnhealthy: []string{"node-ready/unhealthy"},
		}},
		{name: "karpenter preset", flags: TaintFlags{Autoscaler: "karpenter"}, want: TaintKeys{
			Startup:           "readiness.k8s.io/node-ready=true:NoSchedule",
			Unhealthy:         "status-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule",
			PreviousStartup:   []string{"startup-taint.cluster-autoscaler.kubernetes.io/node-ready", "node-ready/unverified"},
			PreviousUnhealthy: []string{"node-ready/unhealthy"},
		}},
		{name: "none: the seed keys", flags: TaintFlags{Autoscaler: "none"}, want: TaintKeys{
			Startup:           "node-ready/unverified=true:NoSchedule",
			Unhealthy:         "node-ready/unhealthy=true:NoSchedule",
			PreviousStartup:   []string{"startup-taint.cluster-autoscaler.kubernetes.io/node-ready", "readiness.k8s.io/node-ready"},
			PreviousUnhealthy: []string{"status-taint.cluster-autoscaler.kubernetes.io/node-ready"},
		}},
		{name: "explicit taints win; the user's previous keys are startup keys, once each",
			flags: TaintFlags{Autoscaler: "none", Startup: "example.com/new=yes:NoExecute", Unhealthy: "example.com/sick:NoSchedule",
				Previous: []string{"example.com/old", "node-ready/unverified", "node-ready/unhealthy", "example.com/new"}},
			want: TaintKeys{
				Startup:   "example.com/new=yes:NoExecute",
				Unhealthy: "example.com/sick:NoSchedule",
				PreviousStartup: []string{"startup-taint.cluster-autoscaler.kubernetes.io/node-ready", "readiness.k8s.io/node-ready",
					"node-ready/unverified", "example.com/old"},
				PreviousUnhealthy: []string{"status-taint.cluster-autoscaler.kubernetes.io/node-ready", "node-ready/unhealthy"},
			}},
		{name: "unknown preset", flags: TaintFlags{Autoscaler: "cluster-autoscaler-2"}, wantErr: true},
		{name: "bad previous key", flags: TaintFlags{Autoscaler: "none", Previous: []string{"a b"}}, wantErr: true},
		{name: "bad taint", flags: TaintFlags{Autoscaler: "none", Startup: "k=v"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.flags.Resolve()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolve =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestDefaultPreset: a user who sets nothing gets keys Cluster Autoscaler
// understands with no flag of its own.
func TestDefaultPreset(t *testing.T) {
	got, err := TaintFlags{Autoscaler: api.DefaultPreset}.Resolve()
	if err != nil || got.Startup != api.CAStartupTaintKey+"=true:NoSchedule" || got.Unhealthy != api.CAStatusTaintKey+"=true:NoSchedule" {
		t.Errorf("default preset = %+v, %v", got, err)
	}
}

// TestPreviousTaintKey: a previous key may not name a taint of Kubernetes
// or Karpenter (the agent would strip it, remediation would count the node
// unverified); readiness tools' prefixes stay allowed.
func TestPreviousTaintKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"node-ready/old":         true,
		"example.com/unverified": true,
		"unprefixed":             true,
		"readiness.k8s.io/cni":   true,
		"startup-taint.cluster-autoscaler.kubernetes.io/x": true,
		"status-taint.cluster-autoscaler.kubernetes.io/x":  true,
		"ignore-taint.cluster-autoscaler.kubernetes.io/x":  true,
		"node.kubernetes.io/unreachable":                   false,
		"node.cloudprovider.kubernetes.io/uninitialized":   false,
		"kubernetes.io/x":           false,
		"k8s.io/x":                  false,
		"karpenter.sh/unregistered": false,
		"Bad Key":                   false,
	} {
		if err := PreviousTaintKey(key); (err == nil) != ok {
			t.Errorf("PreviousTaintKey(%q) = %v, want ok=%v", key, err, ok)
		}
	}
}
