package gates

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func gateNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "gpu", "kubernetes.io/os": "linux"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		}},
	}
}

func daemonSet(ns, name string, mutate func(*corev1.PodSpec)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: map[string]string{"app": name}}}
	if mutate != nil {
		mutate(&ds.Spec.Template.Spec)
	}
	return ds
}

func podOf(ds *appsv1.DaemonSet, name string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: name, OwnerReferences: []metav1.OwnerReference{
			{Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)},
		}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func TestWillRunOn(t *testing.T) {
	ignore := []string{"node-ready/unverified"}
	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		want bool
	}{
		{name: "no constraints runs everywhere (startup taint ignored, not-ready tolerated by default)", ds: daemonSet("a", "plain", nil), want: true},
		{name: "matching node selector", ds: daemonSet("a", "gpu", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "gpu"} }), want: true},
		{name: "other node selector", ds: daemonSet("a", "cpu", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "cpu"} })},
		{name: "required node affinity excludes", ds: daemonSet("a", "aff", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
				}}},
			}}}
		})},
		{name: "pinned to another node", ds: daemonSet("a", "pinned", func(s *corev1.PodSpec) { s.NodeName = "n2" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WillRunOn(tt.ds, gateNode(), ignore); got != tt.want {
				t.Errorf("WillRunOn = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("untolerated taint keeps it off", func(t *testing.T) {
		n := gateNode()
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})
		if WillRunOn(daemonSet("a", "plain", nil), n, ignore) {
			t.Error("a DaemonSet that does not tolerate dedicated=db runs on the node")
		}
		tolerant := daemonSet("a", "db", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		})
		if !WillRunOn(tolerant, n, ignore) {
			t.Error("a DaemonSet tolerating dedicated=db does not run on the node")
		}
	})
	t.Run("startup taint counts unless ignored", func(t *testing.T) {
		if WillRunOn(daemonSet("a", "plain", nil), gateNode(), nil) {
			t.Error("startup taint ignored without being asked to")
		}
	})
}

type fakeSource struct {
	ds     []*appsv1.DaemonSet
	pods   []*corev1.Pod
	synced bool
}

func (f *fakeSource) DaemonSets() []*appsv1.DaemonSet { return f.ds }
func (f *fakeSource) PodsOnNode() []*corev1.Pod       { return f.pods }
func (f *fakeSource) Synced() bool                    { return f.synced }

func TestDaemonSetGate(t *testing.T) {
	cni := daemonSet("kube-system", "cni", nil)
	csi := daemonSet("storage", "csi", nil)
	logs := daemonSet("logging", "shipper", nil)
	self := daemonSet("kube-node-ready", "kube-node-ready", nil)
	other := daemonSet("a", "cpu-only", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "cpu"} })
	all := []*appsv1.DaemonSet{cni, csi, logs, self, other}
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		exclude []DaemonSetExclusion
		sel     string
		want    []string
	}{
		{name: "all ready passes", pods: []*corev1.Pod{podOf(cni, "cni-1", true), podOf(csi, "csi-1", true), podOf(logs, "s-1", true), podOf(self, "agent-1", false)}},
		{name: "not ready and missing pods are waited for, own DaemonSet and other pools are not",
			pods: []*corev1.Pod{podOf(cni, "cni-1", false), podOf(logs, "s-1", true), podOf(self, "agent-1", false)},
			want: []string{"kube-system/cni (pod cni-1 not Ready)", "storage/csi (no pod on this node yet)"}},
		{name: "exclusion by pattern", pods: []*corev1.Pod{podOf(self, "agent-1", false)},
			exclude: []DaemonSetExclusion{{Namespace: "kube-system", Name: "*"}, {Namespace: "storage", Name: "csi"}},
			want:    []string{"logging/shipper (no pod on this node yet)"}},
		{name: "exclusion by label selector", pods: []*corev1.Pod{podOf(self, "agent-1", false)}, sel: "app in (cni,csi)",
			want: []string{"logging/shipper (no pod on this node yet)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &DaemonSets{
				Node: gateNode, Source: &fakeSource{ds: all, pods: tt.pods, synced: true}, SelfPod: "kube-node-ready/agent-1",
				IgnoreTaints: []string{"node-ready/unverified"}, Exclude: tt.exclude,
			}
			if tt.sel != "" {
				sel, err := labels.Parse(tt.sel)
				if err != nil {
					t.Fatal(err)
				}
				g.ExcludeSelector = sel
			}
			got := g.Pending(gateNode())
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Pending = %q, want %q", got, tt.want)
			}
			err := g.Run(context.Background())
			if (err == nil) != (len(tt.want) == 0) {
				t.Errorf("Run = %v, want error %v", err, len(tt.want) > 0)
			}
		})
	}
}

func TestDaemonSetGateTimeout(t *testing.T) {
	stuck := daemonSet("kube-system", "stuck", nil)
	now := time.Unix(1000, 0)
	var reported []string
	g := &DaemonSets{
		Node: gateNode, Source: &fakeSource{ds: []*appsv1.DaemonSet{stuck}, synced: true},
		IgnoreTaints: []string{"node-ready/unverified"}, Timeout: time.Minute,
		OnTimeout: func(ds string, _ time.Duration) { reported = append(reported, ds) },
		now:       func() time.Time { return now },
	}
	if len(g.Pending(gateNode())) != 1 {
		t.Fatal("stuck DaemonSet not waited for at first")
	}
	now = now.Add(59 * time.Second)
	if len(g.Pending(gateNode())) != 1 || len(reported) != 0 {
		t.Fatal("given up before the timeout")
	}
	now = now.Add(time.Second)
	if p := g.Pending(gateNode()); len(p) != 0 {
		t.Fatalf("still waiting after the timeout: %v", p)
	}
	g.Pending(gateNode())
	if len(reported) != 1 || reported[0] != "kube-system/stuck" {
		t.Errorf("reported %v, want kube-system/stuck once", reported)
	}
}

func TestDaemonSetGateNotSynced(t *testing.T) {
	g := &DaemonSets{Node: gateNode, Source: &fakeSource{}}
	if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "not listed yet") {
		t.Errorf("Run before the caches synced = %v, want a not-listed error", err)
	}
}

func TestParseDaemonSetExclusion(t *testing.T) {
	for _, good := range []string{"kube-system/*", "monitoring/node-exporter", "*/fluent-bit"} {
		if _, err := ParseDaemonSetExclusion(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"", "name-only", "/x", "ns/", "ns/[bad"} {
		if _, err := ParseDaemonSetExclusion(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: err = %v, want an error naming it", bad, err)
		}
	}
}

func TestConditionsGate(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, Reason: "NoRouteCreated"},
	}}}
	req := func(s ...string) []ConditionRequirement {
		var out []ConditionRequirement
		for _, x := range s {
			r, err := ParseConditionRequirement(x)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	tests := []struct {
		name     string
		required []ConditionRequirement
		absentOK bool
		want     string
	}{
		{name: "met", required: req("Ready=True")},
		{name: "wrong status names it with the reason", required: req("Ready=True", "NetworkUnavailable=False"),
			want: "conditions: NetworkUnavailable is True, want False (NoRouteCreated)"},
		{name: "absent waits by default", required: req("KernelDeadlock=False"), want: "conditions: KernelDeadlock not reported, want False"},
		{name: "absent passes when configured", required: req("KernelDeadlock=False"), absentOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Conditions{Node: func() *corev1.Node { return node }, Required: tt.required, AbsentPasses: tt.absentOK}
			err := g.Run(context.Background())
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Run = %q, want %q", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"Ready", "Ready=true", "=True", "Ready=Yes", "Re dy=True"} {
		if _, err := ParseConditionRequirement(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseConditionRequirement(%q) = %v, want an error naming it", bad, err)
		}
	}
}
