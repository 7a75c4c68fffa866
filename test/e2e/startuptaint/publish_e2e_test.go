//go:build e2e

package startuptaint

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestPublishModeInjectsOnlyWhenConfigured: with mode publish a
// NodeReadinessRule owns the taint, so the chart's admission adds no
// startup taint to a new node (it still adds the finalizer); with
// webhook.startupTaint.injectInPublishMode and a readiness.k8s.io/ startup
// key (autoscaler karpenter's), it adds that key at creation, for the rule
// to adopt. The real webhook runs with the arguments of each render.
func TestPublishModeInjectsOnlyWhenConfigured(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx := t.Context()
	url := "https://" + webhookIP + ":8443/mutate-node"
	if err := cp.ApplyChartRBAC(ctx, ns, "mode=publish"); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name string
		set  []string
		want []string // keys of ours after creation
	}{
		{"publish", []string{"mode=publish"}, nil},
		{"publish-inject", []string{"mode=publish", "autoscaler=karpenter", "webhook.startupTaint.injectInPublishMode=true"}, []string{api.KarpenterStartupTaintKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chart, err := cp.RenderChartWebhook(ctx, ns, url, values, tc.set...)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := slices.Contains(chart.Args, "--inject-startup-taint=true"), tc.want != nil; got != want {
				t.Fatalf("the chart's webhook arguments %q: injection %v, want %v", chart.Args, got, want)
			}
			if i == 0 {
				if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, chart.Config, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			w := cp.StartWebhook(t, tc.name, webhookIP, append([]string{
				"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--pod-name=" + tc.name, "--extra-sans=" + webhookIP,
				"--webhook-config-name=" + chart.Config.Name, "--log-level=debug", "--mode=publish",
			}, chart.Args...)...)
			w.WaitReady(t, 30*time.Second)
			waitAdmission(t, cp)
			n := create(t, cp, tc.name, linux(nil))
			if !slices.Contains(n.Finalizers, harness.Finalizer) {
				t.Fatalf("node %s was not admitted by the webhook: finalizers %v", n.Name, n.Finalizers)
			}
			if got := ourKeys(n); !slices.Equal(got, tc.want) {
				t.Errorf("startup keys after creation = %v, want %v (taints %v)", got, tc.want, n.Spec.Taints)
			}
			if err := w.Stop(10 * time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}
