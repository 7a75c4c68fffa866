//go:build e2e

package kubectlplugin_test

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestBypassRoundTrip: bypass sets only the annotation, the real agent
// honours it (untaints a node whose dns check fails), unbypass removes only
// it and the agent checks again; repeating either changes nothing.
func TestBypassRoundTrip(t *testing.T) {
	n := cp.NewNode(t, "kp-bypass", startingNode(map[string]string{"example.com/keep": "1"}))
	cp.StartAgent(t, n, append(agentArgs, "--checks=dns,api", "--check.dns.names=does-not-exist.default.svc.cluster.local")...)
	cp.WaitNode(t, n.Name, 15*time.Second, "dns failing in the condition", func(n *corev1.Node) bool {
		c := condition(n)
		return c != nil && c.Reason == api.ReasonChecksFailing
	})
	if !hasTaint(cp.GetNode(t, n.Name), harness.StartupTaint.Key) {
		t.Fatal("node untainted although its dns check fails")
	}

	r := plugin(t, "bypass", n.Name)
	if !strings.HasPrefix(r.stdout, "node/kp-bypass bypassed: node-ready/skip-verification=true") {
		t.Errorf("bypass said %q", r.stdout)
	}
	node := cp.GetNode(t, n.Name)
	if node.Annotations[api.SkipVerificationAnnotation] != "true" || node.Annotations["example.com/keep"] != "1" {
		t.Errorf("annotations after bypass: %v; want the bypass set and the rest kept", node.Annotations)
	}
	if !slices.ContainsFunc(node.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == api.FieldManagerKubectlPlugin }) {
		t.Errorf("no managedFields entry of %s: the write did not come from the plugin", api.FieldManagerKubectlPlugin)
	}
	cp.WaitNode(t, n.Name, 15*time.Second, "untainted by the agent", func(n *corev1.Node) bool {
		c := condition(n)
		return !hasTaint(n, harness.StartupTaint.Key) && c != nil && c.Reason == api.ReasonBypassed
	})
	rows := rowsOf(table(t, plugin(t, "status", "-o", "wide").stdout), n.Name)
	if len(rows) != 1 || rows[0]["BYPASS"] != "true" || rows[0]["TAINT"] != "none" || rows[0]["REASON"] != "Bypassed" {
		t.Errorf("status -o wide of the bypassed node: %v", rows)
	}
	if again := plugin(t, "bypass", n.Name); !strings.HasPrefix(again.stdout, "node/kp-bypass already bypassed") {
		t.Errorf("second bypass said %q", again.stdout)
	}

	r = plugin(t, "unbypass", n.Name)
	if !strings.HasPrefix(r.stdout, "node/kp-bypass unbypassed: node-ready/skip-verification removed") {
		t.Errorf("unbypass said %q", r.stdout)
	}
	node = cp.GetNode(t, n.Name)
	if _, ok := node.Annotations[api.SkipVerificationAnnotation]; ok || node.Annotations["example.com/keep"] != "1" {
		t.Errorf("annotations after unbypass: %v; want the bypass gone and the rest kept", node.Annotations)
	}
	if again := plugin(t, "unbypass", n.Name); !strings.HasPrefix(again.stdout, "node/kp-bypass is not bypassed") {
		t.Errorf("second unbypass said %q", again.stdout)
	}
	cp.WaitNode(t, n.Name, 15*time.Second, "the agent checking again", func(n *corev1.Node) bool {
		c := condition(n)
		return c != nil && c.Reason == api.ReasonChecksFailing
	})
}

// TestKubeconfigContextAndPermissions: --kubeconfig and --context pick the
// credentials (KUBECONFIG points nowhere), and what RBAC refuses is named.
func TestKubeconfigContextAndPermissions(t *testing.T) {
	cp.NewNode(t, "kp-ctx", harness.NodeOptions{})
	ns := harness.AgentNamespace
	ctx := t.Context()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kp-node-viewer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kp-node-viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "kp-viewer", Namespace: ns}}}
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	token := func(sa string) string {
		if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tok, err := cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Status.Token
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["harness"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthority: cp.CAFile}
	for user, tok := range map[string]string{"admin": cp.Config.BearerToken, "viewer": token("kp-viewer"), "nobody": token("kp-nobody")} {
		cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tok}
		cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: user}
	}
	cfg.CurrentContext = "viewer"
	kubeconfig := filepath.Join(t.TempDir(), "contexts.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	nowhere := []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "absent")}
	run := func(stdin string, args ...string) result {
		return kubectl(t, stdin, nowhere, append([]string{"node-ready"}, args...)...)
	}

	if r := run("", "status"); r.code != 1 || !strings.Contains(r.stderr, "error: no kubeconfig found") {
		t.Errorf("without a kubeconfig: %s", r)
	}
	// The current context (viewer) may list nodes but not patch them.
	if r := run("", "status", "--kubeconfig", kubeconfig); r.code != 0 || len(rowsOf(table(t, r.stdout), "kp-ctx")) != 1 {
		t.Errorf("status with --kubeconfig: %s", r)
	}
	forbidden := regexp.MustCompile(`(?m)^error: not allowed to patch nodes kp-ctx: nodes "kp-ctx" is forbidden: User "system:serviceaccount:` + ns + `:kp-viewer" cannot patch resource "nodes"`)
	if r := run("", "bypass", "kp-ctx", "--kubeconfig", kubeconfig); r.code != 1 || !forbidden.MatchString(r.stderr) {
		t.Errorf("bypass as the viewer: %s; want exit 1 and %s", r, forbidden)
	}
	if _, ok := cp.GetNode(t, "kp-ctx").Annotations[api.SkipVerificationAnnotation]; ok {
		t.Fatal("the refused bypass changed the node")
	}
	// why as the viewer: the node and its condition, and why no Events.
	if r := run("", "why", "kp-ctx", "--kubeconfig", kubeconfig); r.code != 0 ||
		!strings.Contains(r.stdout, "namespace default (listing all namespaces is not allowed)") ||
		!strings.Contains(r.stdout, "cannot list them: not allowed to list events.events.k8s.io") ||
		!strings.Contains(r.stderr, "warning: Events not shown: not allowed to list events.events.k8s.io") {
		t.Errorf("why as the viewer: %s", r)
	}
	// --context picks another user of the same file, flags before or after the command.
	if r := run("", "--context", "admin", "bypass", "kp-ctx", "--kubeconfig", kubeconfig); r.code != 0 {
		t.Errorf("bypass with --context admin: %s", r)
	}
	if cp.GetNode(t, "kp-ctx").Annotations[api.SkipVerificationAnnotation] != "true" {
		t.Error("bypass with --context admin did not set the annotation")
	}
	if r := run("", "status", "--kubeconfig="+kubeconfig, "--context=nobody"); r.code != 1 ||
		!strings.Contains(r.stderr, `error: not allowed to list nodes: nodes is forbidden: User "system:serviceaccount:`+ns+`:kp-nobody" cannot list resource "nodes"`) {
		t.Errorf("status as nobody: %s", r)
	}
	if r := run("", "status", "--kubeconfig", kubeconfig, "--context", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, "nosuch") {
		t.Errorf("an unknown context: %s", r)
	}
}
