package startuptaint

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

var (
	caTaint        = corev1.Taint{Key: api.CAStartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	readinessTaint = corev1.Taint{Key: api.KarpenterStartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	seedTaint      = corev1.Taint{Key: api.StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
)

// chartAgent is the agent DaemonSet's placement as the chart renders it by
// default: Linux nodes, not virtual-kubelet or Fargate ones, every taint
// tolerated.
func chartAgent() corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"virtual-kubelet"}},
				{Key: "eks.amazonaws.com/compute-type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"fargate"}},
			}}},
		}}},
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
	}
}

func config() Config {
	return Config{
		Inject:                 true,
		Startup:                caTaint,
		Ours:                   append([]string{caTaint.Key}, api.PreviousStartupTaintKeys()...),
		Agent:                  chartAgent(),
		KarpenterReadinessKeys: true,
	}
}

func linuxNode(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	l := map[string]string{corev1.LabelOSStable: "linux"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: l}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestDecide(t *testing.T) {
	karpenter := map[string]string{NodePoolLabel: "default"}
	tests := []struct {
		name    string
		cfg     func(*Config)
		node    *corev1.Node
		pool    NodePool
		outcome Outcome
		taint   *corev1.Taint
	}{
		{name: "a new Linux node gets the configured startup taint", node: linuxNode(nil), outcome: Added, taint: &caTaint},
		{name: "off adds nothing", cfg: func(c *Config) { c.Inject = false }, node: linuxNode(nil), outcome: Off},
		{name: "observe mode: decided and recorded, never added", cfg: func(c *Config) { c.Observe = true }, node: linuxNode(nil), outcome: Observed},
		{name: "observe mode, a node the DaemonSet does not select", cfg: func(c *Config) { c.Observe = true }, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{corev1.LabelOSStable: "windows"}}}, outcome: NotSelected},
		{name: "the key already there (kubelet --register-with-taints): none added", node: linuxNode(nil, caTaint), outcome: Present},
		{name: "another key of ours already there: no second", node: linuxNode(nil, seedTaint), outcome: Present},
		{name: "our key with another effect counts as present", node: linuxNode(nil, corev1.Taint{Key: caTaint.Key, Effect: corev1.TaintEffectNoExecute}), outcome: Present},
		{name: "a Windows node", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{corev1.LabelOSStable: "windows"}}}, outcome: NotSelected},
		{name: "a node without the os label", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, outcome: NotSelected},
		{name: "a virtual-kubelet node", node: linuxNode(map[string]string{"type": "virtual-kubelet"}, corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "azure", Effect: corev1.TaintEffectNoSchedule}), outcome: NotSelected},
		{name: "a Fargate node", node: linuxNode(map[string]string{"eks.amazonaws.com/compute-type": "fargate"}), outcome: NotSelected},
		{name: "a pool the values exclude by node selector", cfg: func(c *Config) { c.Agent.NodeSelector["pool"] = "general" }, node: linuxNode(map[string]string{"pool": "gpu"}), outcome: NotSelected},
		{name: "a pool the values select", cfg: func(c *Config) { c.Agent.NodeSelector["pool"] = "general" }, node: linuxNode(map[string]string{"pool": "general"}), outcome: Added, taint: &caTaint},
		{
			name: "a taint the DaemonSet does not tolerate",
			cfg: func(c *Config) {
				c.Agent.Tolerations = []corev1.Toleration{{Key: caTaint.Key, Operator: corev1.TolerationOpExists}}
			},
			node: linuxNode(nil, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}), outcome: NotSelected,
		},
		{
			name: "transient start-up taints do not keep the agent away",
			cfg: func(c *Config) {
				c.Agent.Tolerations = []corev1.Toleration{{Key: caTaint.Key, Operator: corev1.TolerationOpExists}}
			},
			node:    linuxNode(nil, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}),
			outcome: Added, taint: &caTaint,
		},
		{
			name: "the startup taint itself not tolerated: nothing the agent could remove",
			cfg: func(c *Config) {
				c.Agent.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
			},
			node: linuxNode(nil), outcome: NotSelected,
		},
		{name: "Karpenter: the NodePool's declared key of ours", node: linuxNode(karpenter), pool: NodePool{Known: true, StartupTaints: []corev1.Taint{seedTaint}}, outcome: Added, taint: &seedTaint},
		{name: "Karpenter: undeclared, a readiness.k8s.io/ key, never the CA key", node: linuxNode(karpenter), pool: NodePool{Known: true}, outcome: Added, taint: &readinessTaint},
		{name: "Karpenter: a declared key not ours is not taken", node: linuxNode(karpenter), pool: NodePool{Known: true, StartupTaints: []corev1.Taint{{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule}}}, outcome: Added, taint: &readinessTaint},
		{name: "Karpenter: NodePool unreadable, a readiness.k8s.io/ key", node: linuxNode(karpenter), outcome: Added, taint: &readinessTaint},
		{name: "Karpenter before v1.13, undeclared: no key is safe", cfg: func(c *Config) { c.KarpenterReadinessKeys = false }, node: linuxNode(karpenter), pool: NodePool{Known: true}, outcome: NoKey},
		{name: "Karpenter before v1.13, NodePool unreadable: no key is safe", cfg: func(c *Config) { c.KarpenterReadinessKeys = false }, node: linuxNode(karpenter), outcome: NoKey},
		{name: "Karpenter before v1.13, declared: that key", cfg: func(c *Config) { c.KarpenterReadinessKeys = false }, node: linuxNode(karpenter), pool: NodePool{Known: true, StartupTaints: []corev1.Taint{caTaint}}, outcome: Added, taint: &caTaint},
		{
			name: "Karpenter: a custom readiness.k8s.io/ startup key is used as configured",
			cfg: func(c *Config) {
				c.Startup = corev1.Taint{Key: "readiness.k8s.io/custom", Value: "true", Effect: corev1.TaintEffectNoSchedule}
				c.Ours = append(c.Ours, c.Startup.Key)
			},
			node: linuxNode(karpenter), pool: NodePool{Known: true}, outcome: Added, taint: &corev1.Taint{Key: "readiness.k8s.io/custom", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		},
		{name: "Karpenter: its declared key already on the node", node: linuxNode(karpenter, readinessTaint), pool: NodePool{Known: true, StartupTaints: []corev1.Taint{readinessTaint}}, outcome: Present},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			d := Decide(cfg, tt.node, tt.pool)
			if d.Outcome != tt.outcome {
				t.Fatalf("outcome = %s (%s), want %s", d.Outcome, d.Why, tt.outcome)
			}
			switch {
			case tt.taint == nil && d.Taint != nil:
				t.Errorf("taint = %v, want none", d.Taint)
			case tt.taint != nil && (d.Taint == nil || *d.Taint != *tt.taint):
				t.Errorf("taint = %v, want %v", d.Taint, tt.taint)
			}
		})
	}
}

// TestEveryInjectedKeyIsRemovedByTheAgent: whatever Decide adds, under
// every preset, is a key the agents remove (api.PreviousStartupTaintKeys).
func TestEveryInjectedKeyIsRemovedByTheAgent(t *testing.T) {
	for _, p := range api.Presets() {
		for _, labels := range []map[string]string{nil, {NodePoolLabel: "p"}} {
			cfg := config()
			cfg.Startup = corev1.Taint{Key: p.StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
			d := Decide(cfg, linuxNode(labels), NodePool{Known: true})
			if d.Taint == nil {
				t.Fatalf("%s %v: no taint (%s)", p.Name, labels, d.Why)
			}
			removed := false
			for _, k := range api.PreviousStartupTaintKeys() {
				removed = removed || k == d.Taint.Key
			}
			if !removed {
				t.Errorf("%s %v: %s is not a key the agent removes", p.Name, labels, d.Taint.Key)
			}
			if labels != nil && d.Taint.Key == api.CAStartupTaintKey {
				t.Errorf("%s: a node Karpenter launched got the Cluster Autoscaler key", p.Name)
			}
		}
	}
}

func TestMissed(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(min int) metav1.Time { return metav1.NewTime(base.Add(time.Duration(min) * time.Minute)) }
	n := func(name string, min int, marked bool) *corev1.Node {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(min)}}
		if marked {
			node.Annotations = map[string]string{api.StartupTaintAdmissionAnnotation: string(Added)}
		}
		return node
	}
	tests := []struct {
		name  string
		nodes []*corev1.Node
		want  []string
	}{
		{"no node marked yet: nothing named", []*corev1.Node{n("old", 1, false), n("new", 5, false)}, nil},
		{"nodes from before injection are not named", []*corev1.Node{n("old", 1, false), n("admitted", 5, true)}, nil},
		{"a node created after an admitted one without the mark is", []*corev1.Node{n("old", 1, false), n("admitted", 5, true), n("missed", 6, false), n("later", 7, true)}, []string{"missed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Missed(tt.nodes)
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("Missed = %v, want %v", got, tt.want)
			}
		})
	}
}
