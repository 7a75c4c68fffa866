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
)

// InstallRBAC applies the chart's RBAC in namespace (every plugin that needs
// permissions enabled) and returns a kubeconfig that authenticates as the
// webhook's ServiceAccount.
func InstallRBAC(ctx context.Context, cp *harness.ControlPlane, namespace string) (string, error) {
	if err := cp.ApplyChartRBAC(ctx, namespace); err != nil {
		return "", err
	}
	tok, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, ServiceAccount, err)
	}
	return cp.WriteKubeconfig("webhook-"+namespace, "system:serviceaccount:"+namespace+":"+ServiceAccount, tok.Status.Token)
}
