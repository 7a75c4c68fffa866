package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// What the binaries may do comes from the rendered chart (ApplyChartRBAC);
// who they are comes from a token of one of its ServiceAccounts, the way a
// pod gets it: bound to a pod on the node for the agent (NodeKubeconfig),
// a plain ServiceAccount token for the webhook (ServiceAccountKubeconfig).

// chartRBACValues enable every cleanup plugin that needs permissions, so the
// rendered webhook ClusterRole covers what the tests exercise.
const chartRBACValues = `webhook:
  cleanup:
    plugins:
      volumeattachments: {}
      local-volumes: {}
      log: {}
`

// rbacKinds are what ApplyChartRBAC takes from the rendered chart: who the
// binaries are, what RBAC grants them, the admission policies that narrow
// those grants further (RBAC cannot say "only your own node" or "only the
// caBundle"), and the Secrets the chart creates for the webhook to fill (it
// may not create Secrets itself).
var rbacKinds = map[string]bool{
	"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true, "Secret": true,
}

// ApplyChartRBAC renders the chart (release ChartRelease in namespace,
// every plugin that needs permissions enabled) and applies its
// ServiceAccounts, Roles, ClusterRoles and bindings, its admission policies
// and the Secrets the webhook fills, and nothing else, so tests that run the
// binaries as processes may do exactly what the chart lets them do. set are
// extra chart values (--set) that change the permissions, such as
// "webhook.remediation.policy=replace". The policies are compiled by the API
// server asynchronously: a test that relies on a denial waits for the first.
func (cp *ControlPlane) ApplyChartRBAC(ctx context.Context, namespace string, set ...string) error {
	chart, err := ChartDir()
	if err != nil {
		return err
	}
	values := filepath.Join(cp.Dir, "chart-rbac-values.yaml")
	if err := os.WriteFile(values, []byte(chartRBACValues), 0o644); err != nil {
		return err
	}
	args := []string{"template", ChartRelease, chart,
		"--namespace", namespace, "--values", values}
	for _, v := range set {
		args = append(args, "--set", v)
	}
	rendered, err := cp.Helm(ctx, args...)
	if err != nil {
		return err
	}
	var keep []string
	for _, doc := range strings.Split(rendered, "\n---") {
		for _, line := range strings.Split(doc, "\n") {
			if kind, ok := strings.CutPrefix(line, "kind: "); ok {
				if rbacKinds[strings.TrimSpace(kind)] {
					keep = append(keep, doc)
				}
				break
			}
		}
	}
	if len(keep) == 0 {
		return fmt.Errorf("the rendered chart holds no RBAC objects")
	}
	if _, err := cp.Kubectl(ctx, nil, "create", "namespace", namespace); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		return err
	}
	_, err = cp.Kubectl(ctx, strings.NewReader(strings.Join(keep, "\n---")), "apply", "--server-side", "-f", "-")
	return err
}

// NodeKubeconfig writes a kubeconfig for serviceAccount in namespace whose
// token is bound to a pod on node, as a DaemonSet pod's projected token is.
func (cp *ControlPlane) NodeKubeconfig(ctx context.Context, namespace, serviceAccount string, node Node) (string, error) {
	token, err := cp.NodeToken(ctx, namespace, serviceAccount, node.Name)
	if err != nil {
		return "", err
	}
	return cp.WriteKubeconfig(serviceAccount+"-"+node.Name, serviceAccount, token)
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as
// serviceAccount in namespace (WebhookServiceAccount, or
// UninstallServiceAccount for the chart's pre-delete Job).
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, serviceAccount string) (string, error) {
	tok, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, serviceAccount, err)
	}
	return cp.WriteKubeconfig(serviceAccount+"-"+namespace, "system:serviceaccount:"+namespace+":"+serviceAccount, tok.Status.Token)
}

// NodeToken returns a ServiceAccount token bound to a Pod scheduled on
// nodeName, as the kubelet would project into a DaemonSet pod: the API server
// puts the node's name into the token's authentication.kubernetes.io/node-name
// extra. The namespace, ServiceAccount and Pod are created when missing.
func (cp *ControlPlane) NodeToken(ctx context.Context, namespace, serviceAccount, nodeName string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: namespace}}
	if _, err := cp.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create serviceaccount %s/%s: %w", namespace, serviceAccount, err)
	}
	podName := fmt.Sprintf("%s-%s", serviceAccount, nodeName)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName:           nodeName,
			ServiceAccountName: serviceAccount,
			Containers:         []corev1.Container{{Name: "agent", Image: "kube-node-ready-agent:harness"}},
		},
	}
	created, err := cp.Client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = cp.Client.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("create pod %s/%s: %w", namespace, podName, err)
	}
	return cp.PodToken(ctx, created)
}

// PodToken returns a token of pod's ServiceAccount bound to pod, as the
// kubelet projects into it: when the pod is on a node, the token carries
// the node's name (authentication.kubernetes.io/node-name).
func (cp *ControlPlane) PodToken(ctx context.Context, pod *corev1.Pod) (string, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	tok, err := cp.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token request for %s/%s bound to pod %s: %w", pod.Namespace, pod.Spec.ServiceAccountName, pod.Name, err)
	}
	return tok.Status.Token, nil
}

// TokenClient is a client of the API server that authenticates with token
// alone (no client certificate of the harness), as a pod holding it would.
func (cp *ControlPlane) TokenClient(token string) (*kubernetes.Clientset, error) {
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = token
	return kubernetes.NewForConfig(cfg)
}
