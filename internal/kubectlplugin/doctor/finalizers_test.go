package doctor

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// heldFinalizers names a finalizer of ours on nodes only when no ready,
// cleaning webhook removes it; a webhook that would but is not ready is to
// be repaired, not bypassed.
func TestHeldFinalizers(t *testing.T) {
	withFinalizers := func(fs ...string) func(*corev1.Node) {
		return func(n *corev1.Node) { n.Finalizers = fs }
	}
	nodes := []corev1.Node{
		node("a", nil),
		node("b", nil, deleting),
		node("c", nil, withFinalizers("karpenter.sh/termination")),
	}
	notReady := workloadtest.WebhookDeployment()
	notReady.Status.ReadyReplicas = 0
	cases := []struct {
		name       string
		deps       []appsv1.Deployment
		wantHeld   bool
		wantDetail string
		wantFix    string
	}{
		{"a ready webhook removes it", []appsv1.Deployment{workloadtest.WebhookDeployment()}, false, "", ""},
		{"renamed to a custom name: the shipped name is still honoured", []appsv1.Deployment{workloadtest.WebhookDeployment("--finalizer=example.com/cleanup")}, false, "", ""},
		{"no webhook", nil, true, "no webhook of kube-node-ready runs", "kubectl patch node a --type=json"},
		{"the webhook has no ready replica", []appsv1.Deployment{notReady}, true, "has no ready replica", "kubectl rollout status deployment/kube-node-ready-webhook"},
		{"the webhook runs no cleanup", []appsv1.Deployment{workloadtest.WebhookDeployment("--cleanup=false")}, true, "--cleanup=false", "kubectl patch node b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			held := heldFinalizers(nodes, tc.deps)
			if !tc.wantHeld {
				if len(held) != 0 {
					t.Fatalf("held %+v, want none", held)
				}
				return
			}
			if len(held) != 1 {
				t.Fatalf("held %+v, want %s alone (never another controller's finalizer)", held, api.Finalizer)
			}
			h := held[0]
			if h.Finalizer != api.Finalizer || !slices.Equal(h.Nodes, []string{"a", "b"}) || !slices.Equal(h.Deleting, []string{"b"}) {
				t.Errorf("held %+v, want %s on a and b, b being deleted", h, api.Finalizer)
			}
			if !strings.Contains(h.Detail, tc.wantDetail) {
				t.Errorf("detail %q, want it to say %q", h.Detail, tc.wantDetail)
			}
			if !slices.ContainsFunc(h.Fixes, func(f string) bool { return strings.Contains(f, tc.wantFix) }) {
				t.Errorf("fixes %q, want one with %q", h.Fixes, tc.wantFix)
			}
		})
	}
}
