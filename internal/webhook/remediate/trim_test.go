package remediate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// cloudNode is node with what a cloud provider's Node also carries (issue
// 35, R12): 61 labels, 9 annotations, a taint of someone else's, 30
// images, managedFields.
func cloudNode(name string, opts ...nodeOpt) *corev1.Node {
	n := node(name, 2*time.Hour, opts...)
	n.ResourceVersion = "4711"
	n.Spec.ProviderID = "aws:///eu-west-1a/i-0123456789abcdef0"
	n.Spec.PodCIDR = "100.64.1.0/24"
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
	for i := 0; len(n.Labels) < 61; i++ {
		n.Labels[fmt.Sprintf("feature.node.kubernetes.io/cpu-cpuid.F%d", i)] = "true"
	}
	for i := 0; len(n.Annotations) < 9; i++ {
		n.Annotations[fmt.Sprintf("csi.volume.kubernetes.io/nodeid-%d", i)] = `{"ebs.csi.aws.com":"i-0123456789abcdef0"}`
	}
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:kubernetes.io/hostname":{}}}}`)}}
	for j := range 30 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example/image-%d@sha256:%064x", j, j)}, SizeBytes: 1 << 24})
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// answers is every question the remediation decisions ask of a cached node.
type answers struct {
	Name, UID, ResourceVersion string
	Created                    time.Time
	Deleting                   bool
	Taint                      string
	Unverified, NeverVerified  bool
	Bypassed, Retainted        bool
	Pool                       string
	Mark                       Mark
	Marked                     bool
	NewMark                    Mark
	StateKey                   string
	Gate                       string
	Counts                     counts
	ClaimOwns, OtherClaimOwns  bool
}

func askAll(c *Controller, n *corev1.Node) answers {
	taint, unverified := c.state(n)
	m, marked := c.validMark(n)
	claim := func(providerID string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"providerID": providerID, "nodeName": n.Name}}}
	}
	cnt := c.countsOf([]*corev1.Node{n}, 100)
	return answers{
		Name: n.Name, UID: string(n.UID), ResourceVersion: n.ResourceVersion, Created: n.CreationTimestamp.Time,
		Deleting: n.DeletionTimestamp != nil, Taint: taint, Unverified: unverified, NeverVerified: c.neverVerified(n),
		Bypassed: c.bypassed(n), Retainted: c.retainted(n), Pool: c.pool(n), Mark: m, Marked: marked,
		NewMark: c.newMark(n, taint, t0), StateKey: c.obs.stateKey(n, taint),
		Gate: c.gate(n, t0.Add(-time.Hour), cnt, t0), Counts: cnt,
		ClaimOwns: claimNames(claim("aws:///eu-west-1a/i-0123456789abcdef0"), n), OtherClaimOwns: claimNames(claim("aws:///eu-west-1a/i-0fffffffffffffff0"), n),
	}
}

// R12: the node informer keeps of a Node only what the decisions read,
// derived from the configuration, and a trimmed Node answers every question
// they ask exactly as the whole Node does. (The other tests of this package
// decide on trimmed nodes too: watched returns them.)
func TestTrimmedNodeAnswersLikeTheWholeNode(t *testing.T) {
	const previousStartup = "node.example/old-startup"
	nodes := map[string]*corev1.Node{
		"never verified, karpenter pool":      cloudNode("a", taint(startup), label("karpenter.sh/nodepool", "general")),
		"re-tainted, eks node group":          cloudNode("b", taint(unhealthy), label("node-ready/verified", "false"), label("eks.amazonaws.com/nodegroup", "ng-1")),
		"verified":                            cloudNode("c", label("node-ready/verified", "true"), label("cloud.google.com/gke-nodepool", "pool-1")),
		"bypassed by the agent annotation":    cloudNode("d", taint(startup), annotation("node-ready/skip-verification", "true")),
		"protected":                           cloudNode("e", taint(startup), annotation("infra.894.io/protect", "true"), label("kubernetes.azure.com/agentpool", "ap1")),
		"marked as replacing":                 cloudNode("f", taint(startup), label("alpha.eksctl.io/nodegroup-name", "x"), marked()),
		"mark of another incarnation":         cloudNode("g", taint(startup), marked(func(m *Mark) { m.UID = "other" })),
		"being deleted":                       cloudNode("h", taint(unhealthy), label("node-ready/verified", "false"), deleting()),
		"a previous startup key":              cloudNode("i", taint(previousStartup), label("example.com/pool", "blue")),
		"someone else's taint only":           cloudNode("j"),
		"custom pool label and a default one": cloudNode("k", taint(startup), label("example.com/pool", "green"), label("karpenter.sh/nodepool", "p")),
	}
	configs := map[string]func(*Config){
		"default pool labels": func(*Config) {},
		"--remediation-pool-label": func(c *Config) {
			c.PoolLabel = "example.com/pool"
		},
	}
	for cname, configure := range configs {
		for name, n := range nodes {
			t.Run(cname+"/"+name, func(t *testing.T) {
				c := testController(t, PolicyReplace, "1", "10%", false)
				c.cfg.StartupTaints = append(c.cfg.StartupTaints, previousStartup)
				configure(&c.cfg)
				obj, err := c.trim(n.DeepCopy())
				if err != nil {
					t.Fatal(err)
				}
				trimmed := obj.(*corev1.Node)
				if whole, cached := askAll(c, n), askAll(c, trimmed); !reflect.DeepEqual(whole, cached) {
					t.Errorf("the trimmed node answers\n%+v\nthe whole node\n%+v", cached, whole)
				}
				raw, err := json.Marshal(trimmed)
				if err != nil {
					t.Fatal(err)
				}
				if len(raw) > 1024 || len(trimmed.Labels) > 3 || len(trimmed.Annotations) > 3 || len(trimmed.Spec.Taints) > 1 {
					t.Errorf("trimmed node keeps %d bytes of JSON, %d labels, %d annotations, %d taints: %s",
						len(raw), len(trimmed.Labels), len(trimmed.Annotations), len(trimmed.Spec.Taints), raw)
				}
			})
		}
	}
}

// The kept keys follow the configuration: a pool label given replaces the
// default ones, and empty names keep nothing.
func TestTrimKeepsTheConfiguredKeys(t *testing.T) {
	c := testController(t, PolicyReplace, "1", "10%", false)
	if got, want := c.keptLabels(), append([]string{"node-ready/verified"}, PoolLabels...); !reflect.DeepEqual(got, want) {
		t.Errorf("kept labels %v, want %v", got, want)
	}
	c.cfg.PoolLabel, c.cfg.VerifiedLabel = "example.com/pool", "example.com/verified"
	if got, want := c.keptLabels(), []string{"example.com/verified", "example.com/pool"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kept labels %v, want %v", got, want)
	}
	c.cfg.ProtectAnnotation = ""
	n := cloudNode("n", taint(startup), label("example.com/pool", "blue"), label("karpenter.sh/nodepool", "p"),
		annotation("infra.894.io/protect", "true"), annotation("node-ready/skip-verification", "false"))
	obj, err := c.trim(n)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Node)
	if want := map[string]string{"example.com/pool": "blue"}; !reflect.DeepEqual(got.Labels, want) {
		t.Errorf("labels %v, want %v", got.Labels, want)
	}
	if want := map[string]string{"node-ready/skip-verification": "false"}; !reflect.DeepEqual(got.Annotations, want) {
		t.Errorf("annotations %v, want %v", got.Annotations, want)
	}
	if want := []corev1.Taint{{Key: startup, Value: "true", Effect: corev1.TaintEffectNoSchedule}}; !reflect.DeepEqual(got.Spec.Taints, want) {
		t.Errorf("taints %v, want %v", got.Spec.Taints, want)
	}
	if got.ManagedFields != nil || len(got.Status.Images) != 0 || got.Spec.PodCIDR != "" {
		t.Errorf("kept what nothing reads: %+v", got)
	}
}
