package harness

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

const (
	// WebhookServiceAccount is the webhook's identity, as the chart names it.
	WebhookServiceAccount = "kube-node-ready-webhook"
	// UninstallServiceAccount runs the chart's pre-delete remove-finalizers Job.
	UninstallServiceAccount = "kube-node-ready-uninstall"
	// WebhookConfigName is the chart's MutatingWebhookConfiguration, the only
	// one its RBAC lets the webhook update.
	WebhookConfigName = "kube-node-ready-webhook"
	// WebhookCertSecret is the Secret the chart creates (empty) for the
	// self-managed CA and serving certificate, the only one its RBAC lets the
	// webhook read and update.
	WebhookCertSecret = "kube-node-ready-webhook-certs"
	// WebhookPort is where the webhook serves admission.
	WebhookPort = 8443
	// Finalizer is the finalizer the webhook manages by default.
	Finalizer = api.Finalizer
)

// StartWebhook runs a webhook replica named name with its admission
// (WebhookPort) and metrics (MetricsPort) ports on ip, then args, which carry
// its credentials (--kubeconfig: ServiceAccountKubeconfig for the chart's
// identity, whose permissions ApplyChartRBAC granted). It is stopped when the
// test ends. Its plugins' secret files are in cp.Dir (--secrets-dir, where
// the chart mounts a Secret); a --secrets-dir in args overrides that.
func (cp *ControlPlane) StartWebhook(tb testing.TB, name, ip string, args ...string) *Daemon {
	tb.Helper()
	all := append([]string{
		"--listen-address=" + hostPort(ip, WebhookPort),
		"--metrics-bind-address=" + hostPort(ip, MetricsPort),
		"--secrets-dir=" + cp.Dir,
	}, args...)
	return cp.startDaemon(tb, name, ip, BuiltBinary(tb, WebhookBinary), all)
}

// StartWebhookBinary is StartWebhook with another build of the webhook (an
// older one, for side-by-side benchmarks).
func (cp *ControlPlane) StartWebhookBinary(tb testing.TB, binary, name, ip string, args ...string) *Daemon {
	tb.Helper()
	all := append([]string{
		"--listen-address=" + hostPort(ip, WebhookPort),
		"--metrics-bind-address=" + hostPort(ip, MetricsPort),
	}, args...)
	return cp.startDaemon(tb, name, ip, binary, all)
}

// WebhookConfig is the MutatingWebhookConfiguration the chart installs, for
// nodes CREATE, calling url.
func WebhookConfig(name, url string, selector *metav1.LabelSelector, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "node-cleanup.infra.894.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url), CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"},
					Scope: ptr.To(admissionregistrationv1.ClusterScope),
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](2),
			AdmissionReviewVersions: []string{"v1"},
			ObjectSelector:          selector,
		}},
	}
}

// NodeYAML is a Node manifest for kubectl.
func NodeYAML(name string, labels map[string]string, finalizers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n", name)
	if len(labels) > 0 {
		b.WriteString("  labels:\n")
		for k, v := range labels {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	if len(finalizers) > 0 {
		b.WriteString("  finalizers:\n")
		for _, f := range finalizers {
			fmt.Fprintf(&b, "  - %s\n", f)
		}
	}
	return b.String()
}
