package doctor

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

var (
	seed = Install{Namespace: "kube-node-ready", Release: "kube-node-ready", Agent: "DaemonSet kube-node-ready/kube-node-ready",
		Startup:   Taint{Key: "node-ready/unverified", Value: "true", Effect: "NoSchedule"},
		Unhealthy: Taint{Key: "node-ready/unhealthy", Value: "true", Effect: "NoSchedule"}}
	caPreset = Install{Namespace: "kube-node-ready", Release: "kube-node-ready", Agent: "DaemonSet kube-node-ready/kube-node-ready",
		Startup: presetTaint(api.PresetClusterAutoscaler, RoleStartup), Unhealthy: presetTaint(api.PresetClusterAutoscaler, RoleUnhealthy)}
	v1141           = Karpenter{Deployment: "Deployment karpenter/karpenter", Version: "1.14.1", VersionFrom: "its image public.ecr.aws/karpenter/controller:1.14.1"}
	v1121           = Karpenter{Deployment: "Deployment karpenter/karpenter", Version: "1.12.1", VersionFrom: "its image public.ecr.aws/karpenter/controller:1.12.1"}
	karpenterPreset = Install{Namespace: "kube-node-ready", Release: "kube-node-ready", Agent: "DaemonSet kube-node-ready/kube-node-ready",
		Startup: presetTaint(api.PresetKarpenter, RoleStartup), Unhealthy: presetTaint(api.PresetKarpenter, RoleUnhealthy)}
)

func ca(args ...string) ClusterAutoscaler {
	c, err := ParseClusterAutoscaler(args)
	if err != nil {
		panic(err)
	}
	c.Namespace, c.Name, c.ArgsField = "kube-system", "cluster-autoscaler", "args"
	return c
}

// summaries are the findings as "severity autoscaler: summary".
func summaries(d Diagnosis) []string {
	var out []string
	for _, f := range d.Findings {
		out = append(out, string(f.Severity)+" "+f.Autoscaler+" "+string(f.Role)+": "+f.Summary)
	}
	return out
}

func TestDiagnose(t *testing.T) {
	withDeadline := func(in Install, d time.Duration) Install {
		in.Remediation, in.UnverifiedDeadline = "replace", d
		return in
	}
	for _, tt := range []struct {
		name  string
		setup Setup
		want  []string
	}{
		{"CA without flags, seed keys", Setup{Install: seed, ClusterAutoscalers: []ClusterAutoscaler{ca()}}, []string{
			"problem Cluster Autoscaler Deployment kube-system/cluster-autoscaler startup: over-scale, template poisoning",
			"problem Cluster Autoscaler Deployment kube-system/cluster-autoscaler unhealthy: template poisoning, capacity not replaced",
		}},
		{"CA with both flags", Setup{Install: seed, ClusterAutoscalers: []ClusterAutoscaler{
			ca("--startup-taint=node-ready/unverified", "--status-taint=node-ready/unhealthy")}}, nil},
		{"CA with the keys the wrong way round", Setup{Install: seed, ClusterAutoscalers: []ClusterAutoscaler{
			ca("--status-taint=node-ready/unverified", "--startup-taint=node-ready/unhealthy")}}, []string{
			"problem Cluster Autoscaler Deployment kube-system/cluster-autoscaler startup: wrong class: status",
			"problem Cluster Autoscaler Deployment kube-system/cluster-autoscaler unhealthy: wrong class: startup",
		}},
		{"CA flag naming the whole taint", Setup{Install: seed, ClusterAutoscalers: []ClusterAutoscaler{
			ca("--startup-taint=node-ready/unverified=true:NoSchedule", "--status-taint=node-ready/unhealthy")}}, []string{
			"problem Cluster Autoscaler Deployment kube-system/cluster-autoscaler startup: over-scale, template poisoning",
		}},
		{"re-taint with the startup key", Setup{Install: Install{Namespace: "kube-node-ready", Release: "kube-node-ready",
			Startup: caPreset.Startup, Unhealthy: caPreset.Startup}, ClusterAutoscalers: []ClusterAutoscaler{ca()}}, []string{
			"advice Cluster Autoscaler Deployment kube-system/cluster-autoscaler unhealthy: re-taints with the startup key",
		}},
		{"re-taint with an unknown startup key: one finding", Setup{Install: Install{Startup: seed.Startup, Unhealthy: seed.Startup},
			ClusterAutoscalers: []ClusterAutoscaler{ca()}}, []string{
			"problem Cluster Autoscaler Deployment kube-system/cluster-autoscaler startup: over-scale, template poisoning",
		}},
		{"CA preset needs no flags", Setup{Install: caPreset, ClusterAutoscalers: []ClusterAutoscaler{ca()}}, nil},
		{"managed CA: advice only", Setup{Install: seed}, []string{
			"advice Cluster Autoscaler (managed, if any) startup: over-scale, template poisoning",
			"advice Cluster Autoscaler (managed, if any) unhealthy: template poisoning, capacity not replaced",
		}},
		{"managed CA with the CA preset", Setup{Install: caPreset}, nil},
		{"deadline past CA's", Setup{Install: withDeadline(caPreset, 20*time.Minute), ClusterAutoscalers: []ClusterAutoscaler{ca()}}, []string{
			"problem Cluster Autoscaler Deployment kube-system/cluster-autoscaler startup: held past Cluster Autoscaler's deadline",
		}},
		{"deadline within CA's", Setup{Install: withDeadline(caPreset, 15*time.Minute), ClusterAutoscalers: []ClusterAutoscaler{ca()}}, nil},
		{"deadline within raised CA times", Setup{Install: withDeadline(caPreset, 20*time.Minute), ClusterAutoscalers: []ClusterAutoscaler{
			ca("--max-node-provision-time=25m", "--max-node-startup-time=25m")}}, nil},
		{"Karpenter NodePool missing our key", Setup{Install: seed, Karpenter: true, NodePools: []NodePool{{Name: "default"}}}, []string{
			"problem Karpenter nodepool/default startup: runaway launches",
		}},
		{"Karpenter NodePool declaring our key", Setup{Install: seed, Karpenter: true, NodePools: []NodePool{{Name: "default", StartupTaints: []Taint{seed.Startup}}}}, nil},
		{"Karpenter NodePool with our key as a permanent taint", Setup{Install: seed, Karpenter: true, NodePools: []NodePool{{Name: "default", Taints: []Taint{seed.Startup}}}}, []string{
			"problem Karpenter nodepool/default startup: declared permanent",
		}},
		{"Karpenter preset declared", Setup{Install: karpenterPreset, Karpenter: true, NodePools: []NodePool{{Name: "default", StartupTaints: []Taint{karpenterPreset.Startup}}}}, nil},
		{"Karpenter preset not declared", Setup{Install: karpenterPreset, Karpenter: true, NodePools: []NodePool{{Name: "default", Karpenter: v1141}}}, []string{
			"advice Karpenter nodepool/default startup: not put on new nodes by Karpenter",
		}},
		{"Karpenter preset not declared, Karpenter v1.12", Setup{Install: karpenterPreset, Karpenter: true, NodePools: []NodePool{{Name: "default", Karpenter: v1121}}}, []string{
			"problem Karpenter nodepool/default startup: runaway launches",
		}},
		{"Karpenter preset not declared, Karpenter's version unreadable", Setup{Install: karpenterPreset, Karpenter: true,
			NodePools: []NodePool{{Name: "default", Karpenter: Karpenter{Deployment: v1121.Deployment}}}}, []string{
			"problem Karpenter nodepool/default startup: runaway launches",
		}},
		{"Karpenter preset not declared, no Karpenter Deployment visible", Setup{Install: karpenterPreset, Karpenter: true, NodePools: []NodePool{{Name: "default"}}}, []string{
			"advice Karpenter nodepool/default startup: runaway launches",
		}},
		{"Karpenter preset declared, Karpenter v1.12", Setup{Install: karpenterPreset, Karpenter: true,
			NodePools: []NodePool{{Name: "default", StartupTaints: []Taint{karpenterPreset.Startup}, Karpenter: v1121}}}, nil},
		{"NodePool still declares the seed key", Setup{Install: karpenterPreset, Karpenter: true, NodePools: []NodePool{{Name: "default", StartupTaints: []Taint{seed.Startup}}}}, []string{
			"advice Karpenter nodepool/default startup: previous key declared",
		}},
		{"NodePool declares both keys", Setup{Install: karpenterPreset, Karpenter: true, NodePools: []NodePool{{Name: "default", StartupTaints: []Taint{seed.Startup, karpenterPreset.Startup}}}}, []string{
			"advice Karpenter nodepool/default startup: previous key declared",
		}},
		{"both autoscalers", Setup{Install: seed, ClusterAutoscalers: []ClusterAutoscaler{ca("--startup-taint=node-ready/unverified")}, Karpenter: true, NodePools: []NodePool{{Name: "gpu"}}}, []string{
			"problem Cluster Autoscaler Deployment kube-system/cluster-autoscaler unhealthy: template poisoning, capacity not replaced",
			"problem Karpenter nodepool/gpu startup: runaway launches",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Diagnose(tt.setup)
			if got := summaries(d); !slices.Equal(got, tt.want) {
				t.Errorf("findings:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if tt.name == "CA flag naming the whole taint" && !strings.Contains(d.Findings[0].Detail, "takes a taint's key alone") {
				t.Errorf("the detail does not say CA takes a key: %s", d.Findings[0].Detail)
			}
			for _, f := range d.Findings {
				if len(f.Fixes) == 0 {
					t.Errorf("finding %q has no fix", f.Summary)
				}
			}
			if n := d.Problems(); n != strings.Count(strings.Join(tt.want, "\n"), "problem ") {
				t.Errorf("Problems() = %d", n)
			}
		})
	}
}

var patchArg = regexp.MustCompile(`-p '(\[.*\])'$`)

// TestNodePoolFixesApply applies the kubectl patch each NodePool finding
// prints to the NodePool, as the API server would, and checks that the
// diagnosis of the patched NodePool has no finding left.
func TestNodePoolFixesApply(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   Install
		pool NodePool
	}{
		{"missing", seed, NodePool{Name: "a"}},
		{"missing, other startup taints", seed, NodePool{Name: "a", StartupTaints: []Taint{{Key: "example.com/x", Effect: "NoSchedule"}}}},
		{"other effect", seed, NodePool{Name: "a", StartupTaints: []Taint{{Key: seed.Startup.Key, Effect: "NoExecute"}}}},
		{"permanent", seed, NodePool{Name: "a", Taints: []Taint{{Key: "example.com/gpu", Effect: "NoSchedule"}, seed.Startup}}},
		{"previous key", karpenterPreset, NodePool{Name: "a", StartupTaints: []Taint{seed.Startup}}},
		{"previous and current key", karpenterPreset, NodePool{Name: "a", StartupTaints: []Taint{karpenterPreset.Startup, seed.Startup}}},
		{"readiness key not declared", karpenterPreset, NodePool{Name: "a", Karpenter: v1141}},
		{"readiness key not declared, Karpenter v1.12", karpenterPreset, NodePool{Name: "a", Karpenter: v1121}},
		{"readiness key not declared, Karpenter's version unknown", karpenterPreset, NodePool{Name: "a"}},
		{"readiness key added at creation, Karpenter v1.12", injecting(caPreset), NodePool{Name: "a", Karpenter: v1121}},
		{"readiness key added at creation, agent on it, Karpenter v1.12", injecting(karpenterPreset), NodePool{Name: "a", Karpenter: v1121}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pool := tt.pool
			for round := 0; round < 3; round++ {
				d := Diagnose(Setup{Install: tt.in, Karpenter: true, NodePools: []NodePool{pool}})
				if len(d.Findings) == 0 {
					return
				}
				m := patchArg.FindStringSubmatch(d.Findings[0].Fixes[0])
				if m == nil {
					t.Fatalf("fix %q has no patch", d.Findings[0].Fixes[0])
				}
				pool = applyPoolPatch(t, pool, m[1])
			}
			t.Fatalf("findings left after applying the fixes: %v", summaries(Diagnose(Setup{Install: tt.in, Karpenter: true, NodePools: []NodePool{pool}})))
		})
	}
}

// injecting is in with the webhook adding the Karpenter preset's key at
// creation to nodes of NodePools that declare none of ours.
func injecting(in Install) Install {
	in.InjectsReadinessKey = true
	return in
}

// applyPoolPatch applies a JSON patch to p written as a NodePool object.
func applyPoolPatch(t *testing.T, p NodePool, patch string) NodePool {
	t.Helper()
	type spec struct {
		StartupTaints []Taint `json:"startupTaints,omitempty"`
		Taints        []Taint `json:"taints,omitempty"`
	}
	type object struct {
		Spec struct {
			Template struct {
				Spec spec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var o object
	o.Spec.Template.Spec = spec{StartupTaints: p.StartupTaints, Taints: p.Taints}
	doc, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := jsonpatch.DecodePatch([]byte(patch))
	if err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	if doc, err = ops.Apply(doc); err != nil {
		t.Fatalf("apply %s to %s: %v", patch, doc, err)
	}
	o = object{}
	if err := json.Unmarshal(doc, &o); err != nil {
		t.Fatal(err)
	}
	return NodePool{Name: p.Name, StartupTaints: o.Spec.Template.Spec.StartupTaints, Taints: o.Spec.Template.Spec.Taints, Karpenter: p.Karpenter}
}

// TestClusterAutoscalerFixesApply applies the kubectl patch each Cluster
// Autoscaler finding prints to a Deployment's container and checks that
// the diagnosis of the patched flags has no finding left.
func TestClusterAutoscalerFixesApply(t *testing.T) {
	in := seed
	in.Remediation, in.UnverifiedDeadline = "replace", 30*time.Minute
	for _, field := range []string{"args", "command"} {
		t.Run(field, func(t *testing.T) {
			containers := []map[string][]string{{field: {"--v=4"}}}
			for round := 0; round < 4; round++ {
				c, err := ParseClusterAutoscaler(containers[0][field])
				if err != nil {
					t.Fatal(err)
				}
				c.Namespace, c.Name, c.ArgsField = "kube-system", "cluster-autoscaler", field
				d := Diagnose(Setup{Install: in, ClusterAutoscalers: []ClusterAutoscaler{c}})
				if len(d.Findings) == 0 {
					return
				}
				// The last fix of a deadline finding raises CA's times; the first of the others adds a flag.
				fixes := d.Findings[0].Fixes
				m := patchArg.FindStringSubmatch(fixes[len(fixes)-1])
				if d.Findings[0].Summary != "held past Cluster Autoscaler's deadline" {
					m = patchArg.FindStringSubmatch(fixes[0])
				}
				if m == nil {
					t.Fatalf("fix %q has no patch", fixes)
				}
				doc, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": containers}}}})
				if err != nil {
					t.Fatal(err)
				}
				ops, err := jsonpatch.DecodePatch([]byte(m[1]))
				if err != nil {
					t.Fatal(err)
				}
				if doc, err = ops.Apply(doc); err != nil {
					t.Fatalf("apply %s: %v", m[1], err)
				}
				var o struct {
					Spec struct {
						Template struct {
							Spec struct {
								Containers []map[string][]string `json:"containers"`
							} `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				}
				if err := json.Unmarshal(doc, &o); err != nil {
					t.Fatal(err)
				}
				containers = o.Spec.Template.Spec.Containers
			}
			t.Fatalf("findings left after the fixes: %v", containers)
		})
	}
}
