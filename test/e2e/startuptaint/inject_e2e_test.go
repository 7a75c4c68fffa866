//go:build e2e

package startuptaint

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/placement"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ns        = "kube-node-ready"
	webhookIP = "10.213.0.3"
	startup   = api.CAStartupTaintKey // the default preset's
)

// values narrow the agent's placement as a user would: a pool excluded by
// affinity, and tolerations of our keys only (so a node tainted for someone
// else is not the agent's).
const values = `agent:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: type, operator: NotIn, values: [virtual-kubelet]}
              - {key: eks.amazonaws.com/compute-type, operator: NotIn, values: [fargate]}
              - {key: knr-e2e/pool, operator: NotIn, values: [excluded]}
  tolerations:
    - {key: startup-taint.cluster-autoscaler.kubernetes.io/node-ready, operator: Exists}
    - {key: status-taint.cluster-autoscaler.kubernetes.io/node-ready, operator: Exists}
    - {key: readiness.k8s.io/node-ready, operator: Exists}
    - {key: node-ready/unverified, operator: Exists}
`

// TestStartupTaintAtCreation: with the chart's rendered admission, a new
// node the agent DaemonSet will run on gets exactly one startup taint, and
// no other node, no update and no back-fill ever adds one.
func TestStartupTaintAtCreation(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx := t.Context()
	nodes := cp.Client.CoreV1().Nodes()

	chart, err := cp.RenderChartWebhook(ctx, ns, "https://"+webhookIP+":8443/mutate-node", values)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(chart.Args, "--inject-startup-taint=true") {
		t.Fatalf("the chart does not turn injection on by default: %q", chart.Args)
	}
	if err := cp.ApplyChartRBAC(ctx, ns); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}

	// A node from before the webhook: back-fill gives it the finalizer and nothing else.
	before := create(t, cp, "before", linux(nil))

	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, chart.Config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := func(name string) *harness.Daemon {
		d := cp.StartWebhook(t, name, webhookIP, append([]string{
			"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--pod-name=" + name, "--extra-sans=" + webhookIP,
			"--webhook-config-name=" + chart.Config.Name, "--log-level=debug",
		}, chart.Args...)...)
		d.WaitReady(t, 30*time.Second)
		waitAdmission(t, cp)
		return d
	}
	w := start("webhook")

	cases := []struct {
		name   string
		node   *corev1.Node
		taints []string // keys of ours wanted after creation
		mark   string
	}{
		{"linux", linux(nil), []string{startup}, "added"},
		{"registered-with-the-key", linux(nil, corev1.Taint{Key: startup, Value: "true", Effect: corev1.TaintEffectNoSchedule}), []string{startup}, "present"},
		{"registered-with-a-previous-key", linux(nil, corev1.Taint{Key: api.StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}), []string{api.StartupTaintKey}, "present"},
		{"karpenter-launched", linux(map[string]string{"karpenter.sh/nodepool": "default"}), []string{api.KarpenterStartupTaintKey}, "added"},
		{"windows", node(map[string]string{corev1.LabelOSStable: "windows"}), nil, "not-selected"},
		{"virtual-kubelet", linux(map[string]string{"type": "virtual-kubelet"}, corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "mock", Effect: corev1.TaintEffectNoSchedule}), nil, "not-selected"},
		{"fargate", linux(map[string]string{"eks.amazonaws.com/compute-type": "fargate"}), nil, "not-selected"},
		{"excluded-pool", linux(map[string]string{"knr-e2e/pool": "excluded"}), nil, "not-selected"},
		{"untolerated-taint", linux(nil, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}), nil, "not-selected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := create(t, cp, tc.name, tc.node)
			if got := ourKeys(n); !slices.Equal(got, tc.taints) {
				t.Errorf("startup keys after creation = %v, want %v (taints %v)", got, tc.taints, n.Spec.Taints)
			}
			if got := n.Annotations[api.StartupTaintAdmissionAnnotation]; got != tc.mark {
				t.Errorf("mark = %q, want %q", got, tc.mark)
			}
			// One source: the chart's DaemonSet runs on exactly the nodes
			// admission considered (added or present).
			tc.node.Name = tc.name
			runs := placement.DaemonPodRunsOn(&chart.DaemonSet.Spec.Template.Spec, tc.node, nil)
			if want := tc.mark != "not-selected"; runs != want {
				t.Errorf("the rendered DaemonSet runs on it: %v; admission considered it: %v", runs, want)
			}
		})
	}

	t.Run("update never adds", func(t *testing.T) {
		before := w.Metric(t, "node_cleanup_webhook_requests_total")
		n := cp.GetNode(t, "windows")
		n.Labels[corev1.LabelOSStable] = "linux"
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Anchor: a creation after the update was admitted, so the update
		// went through admission's configuration first.
		create(t, cp, "after-update", linux(nil))
		if after := w.Metric(t, "node_cleanup_webhook_requests_total"); after != before+1 {
			t.Errorf("admission requests went from %v to %v for one creation: the update was sent", before, after)
		}
		if got := ourKeys(cp.GetNode(t, "windows")); len(got) != 0 {
			t.Errorf("an update added %v", got)
		}
	})

	t.Run("back-fill never adds", func(t *testing.T) {
		n := cp.WaitNode(t, before.Name, 30*time.Second, "the back-filled finalizer", func(n *corev1.Node) bool {
			return slices.Contains(n.Finalizers, harness.Finalizer)
		})
		if got := ourKeys(n); len(got) != 0 {
			t.Errorf("the node from before the webhook got %v", got)
		}
		if _, ok := n.Annotations[api.StartupTaintAdmissionAnnotation]; ok {
			t.Errorf("the node from before the webhook was marked: %v", n.Annotations)
		}
	})

	t.Run("a node that joined while the webhook was down is named", func(t *testing.T) {
		if err := w.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		// Creation times have a resolution of one second: a node counts as
		// joined after the first admitted one from the next second on.
		first := cp.GetNode(t, "linux").CreationTimestamp.Time
		harness.WaitFor(t, 5*time.Second, "the second after the first admitted node's", func() bool {
			return time.Now().Truncate(time.Second).After(first)
		})
		missed := create(t, cp, "joined-while-down", linux(nil))
		if len(missed.Spec.Taints) != 0 || slices.Contains(missed.Finalizers, harness.Finalizer) {
			t.Fatalf("admission still answered while the webhook was stopped: %v %v", missed.Spec.Taints, missed.Finalizers)
		}
		w2 := start("webhook-2")
		cp.WaitEvent(t, 60*time.Second, "Node", missed.Name, api.EventStartupTaintMissed, "")
		harness.Eventually(t, 30*time.Second, "the gauge names one node", func() (bool, string) {
			v := w2.Metric(t, "node_cleanup_webhook_startup_taint_missed_nodes")
			return v == 1, fmt.Sprint(v)
		})
		for _, name := range []string{before.Name, "linux", "windows"} {
			if notes := cp.EventNotes(t, "Node", name, api.EventStartupTaintMissed); len(notes) > 0 {
				t.Errorf("%s named as missed: %q", name, notes)
			}
		}
	})
}

func node(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

// linux is a node as a kubelet registers it: with its OS label.
func linux(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	l := map[string]string{corev1.LabelOSStable: "linux"}
	for k, v := range labels {
		l[k] = v
	}
	return node(l, taints...)
}

// create creates n as name and returns what the API server stored.
func create(t *testing.T, cp *harness.ControlPlane, name string, n *corev1.Node) *corev1.Node {
	t.Helper()
	n = n.DeepCopy()
	n.Name = name
	out, err := cp.Client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ourKeys are the startup and unhealthy keys of ours on n.
func ourKeys(n *corev1.Node) []string {
	var keys []string
	for _, t := range n.Spec.Taints {
		if slices.Contains(api.PreviousStartupTaintKeys(), t.Key) || slices.Contains(api.PreviousUnhealthyTaintKeys(), t.Key) {
			keys = append(keys, t.Key)
		}
	}
	return keys
}

// waitAdmission waits until the API server calls the webhook: a probe node
// comes back with the finalizer (then it is removed).
func waitAdmission(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	harness.WaitFor(t, 30*time.Second, "a new Node admitted by the webhook", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		if err != nil {
			return false
		}
		cp.RemoveNode(t, n.Name)
		return slices.Contains(n.Finalizers, harness.Finalizer) && strings.HasPrefix(n.Name, "probe-")
	})
}
