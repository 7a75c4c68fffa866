package webhookenv

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	// ServiceAccount is the webhook's identity, as the chart names it.
	ServiceAccount = "kube-node-ready-webhook"
	// ConfigName is the chart's MutatingWebhookConfiguration, the only one
	// its RBAC lets the webhook update.
	ConfigName = "kube-node-ready-webhook"
	// UninstallServiceAccount runs the chart's pre-delete remove-finalizers Job.
	UninstallServiceAccount = "kube-node-ready-uninstall"
)

// InstallRBAC applies the chart's RBAC in namespace (every plugin that needs
// permissions enabled) and returns a kubeconfig that authenticates as the
// webhook's ServiceAccount.
func InstallRBAC(ctx context.Context, cp *harness.ControlPlane, namespace string) (string, error) {
	if err := cp.ApplyChartRBAC(ctx, namespace); err != nil {
		return "", err
	}
	return Kubeconfig(ctx, cp, namespace, ServiceAccount)
}

// Kubeconfig writes a kubeconfig that authenticates as a ServiceAccount of
// the chart (ServiceAccount, or UninstallServiceAccount for the pre-delete
// Job's identity).
func Kubeconfig(ctx context.Context, cp *harness.ControlPlane, namespace, serviceAccount string) (string, error) {
	tok, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, serviceAccount, err)
	}
	return cp.WriteKubeconfig(serviceAccount+"-"+namespace, "system:serviceaccount:"+namespace+":"+serviceAccount, tok.Status.Token)
}
