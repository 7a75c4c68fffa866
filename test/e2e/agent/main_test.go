//go:build e2e

// Package agent_test runs the real agent binary, one process per simulated
// node, against the real control plane of the test harness.
package agent_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	namespace   = "kube-node-ready"
	agentSA     = "kube-node-ready"
	peerService = "kube-node-ready"
)

var cp *harness.ControlPlane

func TestMain(m *testing.M) {
	if err := harness.EnterNetworkNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	var err error
	cp, err = harness.Start(ctx, harness.Options{Logf: log.Printf})
	if err == nil {
		err = installAgentRBAC(ctx)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "control plane logs:\n%s", cp.Logs(40))
	}
	cp.Stop()
	os.Exit(code)
}

// installAgentRBAC grants the agent's ServiceAccount what the chart grants it.
func installAgentRBAC(ctx context.Context) error {
	c := cp.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-node-ready-agent"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: agentSA, Namespace: namespace}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-node-ready-agent"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   subject,
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return err
	}
	leaseRole := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-node-ready-agent", Namespace: namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		},
	}
	if _, err := c.RbacV1().Roles(namespace).Create(ctx, leaseRole, metav1.CreateOptions{}); err != nil {
		return err
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-node-ready-agent", Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: leaseRole.Name},
		Subjects:   subject,
	}
	_, err := c.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{})
	return err
}

// agent is one running agent process playing one node.
type agent struct {
	node harness.Node
	proc *harness.Process
	args []string
	env  []string
}

func (a *agent) url(path string) string { return "http://" + a.node.IP + ":8080" + path }

// baseArgs are the flags every test agent runs with: short periods, the
// harness resolver, an external name CoreDNS answers, the kubernetes Service.
func baseArgs(node harness.Node, kubeconfig string) []string {
	return []string{
		"--node-name=" + node.Name,
		"--pod-ip=" + node.IP,
		"--pod-namespace=" + namespace,
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=" + node.IP + ":8080",
		"--check.dns.resolv-conf=" + cp.ResolvConf,
		"--check.dns.external-names=" + harness.ExternalName,
		"--check.network.kubernetes-service=" + harness.KubernetesServiceIP + ":443",
		"--check-period=1s",
		"--check-timeout=1s",
		"--initial-backoff=100ms",
		"--log-level=debug",
	}
}

// newNode creates a tainted node, deleted when the test ends.
func newNode(t *testing.T, name string, opts harness.NodeOptions) harness.Node {
	t.Helper()
	n, err := cp.CreateNode(t.Context(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", name, err)
		}
	})
	return n
}

// nodeKubeconfig writes a kubeconfig whose token is bound to a pod on node.
func nodeKubeconfig(t *testing.T, sa string, node harness.Node) string {
	t.Helper()
	token, err := cp.NodeToken(t.Context(), namespace, sa, node.Name)
	if err != nil {
		t.Fatal(err)
	}
	path, err := cp.WriteKubeconfig(sa+"-"+node.Name, sa, token)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startAgent runs the real agent binary for node, stopped when the test ends.
func startAgent(t *testing.T, node harness.Node, extra ...string) *agent {
	t.Helper()
	a := &agent{node: node, args: append(baseArgs(node, nodeKubeconfig(t, agentSA, node)), extra...)}
	a.start(t)
	t.Cleanup(func() {
		if err := a.proc.Stop(5 * time.Second); err != nil {
			t.Errorf("stop agent %s: %v", node.Name, err)
		}
		if t.Failed() {
			t.Logf("agent %s log:\n%s", node.Name, a.proc.Tail(30))
		}
	})
	return a
}

func (a *agent) start(t *testing.T) {
	t.Helper()
	p, err := harness.StartProcess(cp.Dir, "agent-"+a.node.Name, agentBinary(t), a.args, a.env)
	if err != nil {
		t.Fatal(err)
	}
	a.proc = p
}

func agentBinary(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "bin", "kube-node-ready-agent")
}

// publishPeers writes the agents' headless Service EndpointSlice, as the
// endpointslice controller would for ready agent pods.
func publishPeers(t *testing.T, nodes ...harness.Node) {
	t.Helper()
	ctx := t.Context()
	slices := cp.Client.DiscoveryV1().EndpointSlices(namespace)
	_ = slices.Delete(ctx, peerService, metav1.DeleteOptions{})
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: peerService, Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: peerService, discoveryv1.LabelManagedBy: "e2e.kube-node-ready",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, n := range nodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{n.IP}, NodeName: ptr.To(n.Name),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slices.Delete(context.Background(), peerService, metav1.DeleteOptions{}) })
}

func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == harness.StartupTaint.Key && t.Effect == harness.StartupTaint.Effect
	})
}

// waitNode waits until cond holds for the node.
func waitNode(t *testing.T, name string, timeout time.Duration, what string, cond func(*corev1.Node) bool) {
	t.Helper()
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		return cond(n), nil
	})
	if err != nil {
		t.Fatalf("node %s: %s not reached within %s; taints=%v labels=%v", name, what, timeout, last.Spec.Taints, last.Labels)
	}
}

func verified(n *corev1.Node) bool { return !tainted(n) && n.Labels["node-ready/verified"] == "true" }

// httpGet returns status and body of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventReasons lists the reasons of the Events recorded on node.
func eventReasons(t *testing.T, node string) []string {
	t.Helper()
	// The core/v1 view of the same Events supports field selectors on the object.
	list, err := cp.Client.CoreV1().Events(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

func waitEvent(t *testing.T, node, reason string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if slices.Contains(eventReasons(t, node), reason) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no %s Event on node %s within %s; have %v", reason, node, timeout, eventReasons(t, node))
}

func logContains(p *harness.Process, s string) bool {
	b, err := os.ReadFile(p.LogPath)
	return err == nil && strings.Contains(string(b), s)
}
