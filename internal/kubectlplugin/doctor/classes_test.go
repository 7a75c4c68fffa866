package doctor

import "testing"

// TestClusterAutoscalerClasses encodes Cluster Autoscaler's documented
// taint rules (FAQ "How can I prevent Cluster Autoscaler from scaling down
// a particular node?" / "startup taints", utils/taints/taints.go), one case
// per rule; the name of each case names the rule.
func TestClusterAutoscalerClasses(t *testing.T) {
	flagged := ClusterAutoscaler{
		StartupTaints:        []string{"example.com/booting", "example.com/both"},
		StatusTaints:         []string{"example.com/broken", "example.com/both"},
		StartupTaintPrefixes: []string{"readiness.k8s.io/"},
	}
	for _, tt := range []struct {
		name string
		ca   ClusterAutoscaler
		key  string
		want Class
	}{
		// Rule: a key given to --startup-taint (or --ignore-taint) is a startup taint.
		{"startup-taint flag names the key", flagged, "example.com/booting", Startup},
		// Rule: keys under startup-taint.cluster-autoscaler.kubernetes.io/ are startup taints without any flag.
		{"startup-taint prefix is reserved", ClusterAutoscaler{}, "startup-taint.cluster-autoscaler.kubernetes.io/node-ready", Startup},
		// Rule: the older ignore-taint.cluster-autoscaler.kubernetes.io/ prefix still means startup.
		{"ignore-taint prefix is the older startup prefix", ClusterAutoscaler{}, "ignore-taint.cluster-autoscaler.kubernetes.io/node-ready", Startup},
		// Rule (CA 1.36): any prefix given to --startup-taint-prefix marks startup taints.
		{"startup-taint-prefix flag adds a prefix", flagged, "readiness.k8s.io/node-ready", Startup},
		// Rule: a key given to --status-taint is a status taint.
		{"status-taint flag names the key", flagged, "example.com/broken", Status},
		// Rule: keys under status-taint.cluster-autoscaler.kubernetes.io/ are status taints without any flag.
		{"status-taint prefix is reserved", ClusterAutoscaler{}, "status-taint.cluster-autoscaler.kubernetes.io/node-ready", Status},
		// Rule: startup is checked before status; a key named both ways is startup.
		{"startup wins over status", flagged, "example.com/both", Startup},
		// Rule: everything else is unknown (counted as Ready capacity).
		{"seed startup key without flags is unknown", ClusterAutoscaler{}, "node-ready/unverified", Unknown},
		{"seed unhealthy key without flags is unknown", ClusterAutoscaler{}, "node-ready/unhealthy", Unknown},
		// Rule: a flag names a key exactly, not a prefix of it.
		{"startup-taint flag is not a prefix", flagged, "example.com/booting-late", Unknown},
		// Rule: the prefixes are whole prefixes with their slash; a look-alike domain is unknown.
		{"look-alike of the reserved prefix", ClusterAutoscaler{}, "startup-taint.cluster-autoscaler.kubernetes.io.example.com/x", Unknown},
		// Rule: without --startup-taint-prefix the readiness.k8s.io/ prefix means nothing to CA.
		{"readiness prefix is unknown to CA by default", ClusterAutoscaler{}, "readiness.k8s.io/node-ready", Unknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, rule := tt.ca.Classify(tt.key); got != tt.want {
				t.Errorf("Classify(%q) = %s (%s), want %s", tt.key, got, rule, tt.want)
			}
		})
	}
}

// TestKarpenterClasses encodes Karpenter's rules (pkg/scheduling/taints.go,
// pkg/controllers/state/statenode.go at v1.14.1): until initialized, a
// node's startupTaints (matched by key and effect), its known ephemeral
// taints and, from v1.13.0 (not in v1.12.1's taints.go), keys under
// readiness.k8s.io/ are ignored; all else is permanent.
func TestKarpenterClasses(t *testing.T) {
	ours := Taint{Key: "node-ready/unverified", Value: "true", Effect: "NoSchedule"}
	readinessKey := Taint{Key: "readiness.k8s.io/node-ready", Value: "true", Effect: "NoSchedule"}
	v1131 := NodePool{Karpenter: Karpenter{Version: "1.14.1"}}
	for _, tt := range []struct {
		name  string
		pool  NodePool
		taint Taint
		want  Class
	}{
		{"declared in startupTaints", NodePool{StartupTaints: []Taint{ours}}, ours, Startup},
		{"declared with another value still matches", NodePool{StartupTaints: []Taint{{Key: ours.Key, Value: "x", Effect: "NoSchedule"}}}, ours, Startup},
		{"declared with another effect does not match", NodePool{StartupTaints: []Taint{{Key: ours.Key, Effect: "NoExecute"}}}, ours, Permanent},
		{"not declared is permanent", NodePool{}, ours, Permanent},
		{"declared in taints is permanent", NodePool{Taints: []Taint{ours}}, ours, Permanent},
		{"readiness prefix is ephemeral without declaring it from v1.13.0", v1131, readinessKey, Startup},
		{"readiness prefix from its first release", NodePool{Karpenter: Karpenter{Version: "v1.13.0"}}, readinessKey, Startup},
		{"readiness prefix is permanent on v1.12", NodePool{Karpenter: Karpenter{Version: "1.12.1"}}, readinessKey, Permanent},
		{"readiness prefix is permanent on a v1.13.0 pre-release", NodePool{Karpenter: Karpenter{Version: "1.13.0-rc.1"}}, readinessKey, Permanent},
		{"readiness prefix is permanent when the version is unknown", NodePool{}, readinessKey, Permanent},
		{"readiness key declared works on v1.12", NodePool{StartupTaints: []Taint{readinessKey}, Karpenter: Karpenter{Version: "1.12.1"}}, readinessKey, Startup},
		{"readiness key in taints is ignored until initialization (diagnose: declared permanent)", NodePool{Taints: []Taint{readinessKey}, Karpenter: Karpenter{Version: "1.14.1"}}, readinessKey, Startup},
		{"known ephemeral taint", NodePool{}, Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: "NoSchedule"}, Startup},
		{"CA's startup prefix means nothing to Karpenter", NodePool{}, Taint{Key: CAStartupPrefix + "node-ready", Effect: "NoSchedule"}, Permanent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, rule := tt.pool.Classify(tt.taint); got != tt.want {
				t.Errorf("Classify(%s) = %s (%s), want %s", tt.taint, got, rule, tt.want)
			}
		})
	}
}

func TestParseTaint(t *testing.T) {
	for in, want := range map[string]Taint{
		"node-ready/unverified=true:NoSchedule": {Key: "node-ready/unverified", Value: "true", Effect: "NoSchedule"},
		"example.com/x:NoExecute":               {Key: "example.com/x", Effect: "NoExecute"},
	} {
		got, err := ParseTaint(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseTaint(%q) = %+v, %v; want %+v and the same string back", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "node-ready/unverified", ":NoSchedule", "k=v:"} {
		if _, err := ParseTaint(bad); err == nil {
			t.Errorf("ParseTaint(%q) took it", bad)
		}
	}
}
