package webhookenv

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// ServiceAccount is the webhook's identity in tests.
const ServiceAccount = "kube-node-ready-webhook"

// ClusterRules are what the webhook needs cluster-wide with every built-in
// plugin enabled: the README documents them per plugin and the chart grants
// them. webhookConfig is the MutatingWebhookConfiguration's name.
func ClusterRules(webhookConfig string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// watcher: informer, back-fill, finalizer removal; plugins re-read the node's UID
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		// self-managed caBundle, back-fill pause check; delete for remove-finalizers
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{webhookConfig}, Verbs: []string{"get", "update", "delete"}},
		// volumeattachments plugin
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"volumeattachments"}, Verbs: []string{"list", "delete"}},
		// local-volumes plugin
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"delete"}},
	}
}

// NamespaceRules are what the webhook needs in its own namespace.
func NamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update"}},
	}
}

// InstallRBAC creates the webhook's ServiceAccount in namespace with
// ClusterRules and NamespaceRules, and returns a kubeconfig that
// authenticates as it.
func InstallRBAC(ctx context.Context, cp *harness.ControlPlane, namespace, webhookConfig string) (string, error) {
	c := cp.Client
	create := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err := create2(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})); create(err) != nil {
		return "", err
	}
	if err := create2(c.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount}}, metav1.CreateOptions{})); create(err) != nil {
		return "", err
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: ServiceAccount, Namespace: namespace}}
	if err := create2(c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount}, Rules: ClusterRules(webhookConfig)}, metav1.CreateOptions{})); create(err) != nil {
		return "", err
	}
	if err := create2(c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: ServiceAccount},
		Subjects:   subjects,
	}, metav1.CreateOptions{})); create(err) != nil {
		return "", err
	}
	if err := create2(c.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount}, Rules: NamespaceRules()}, metav1.CreateOptions{})); create(err) != nil {
		return "", err
	}
	if err := create2(c.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: ServiceAccount},
		Subjects:   subjects,
	}, metav1.CreateOptions{})); create(err) != nil {
		return "", err
	}
	tok, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, ServiceAccount, err)
	}
	return cp.WriteKubeconfig("webhook-"+namespace, "system:serviceaccount:"+namespace+":"+ServiceAccount, tok.Status.Token)
}

func create2[T any](_ T, err error) error { return err }
