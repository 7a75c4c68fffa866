package harness

import (
	"context"
	"encoding/json"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// StartupTaint is the taint every simulated node is created with.
var StartupTaint = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// Node is a simulated node: a Node object plus the address the process that
// plays it binds to (its InternalIP, and its pod IP).
type Node struct {
	// Name is the Node object's name.
	Name string
	// IP is the node's own address inside ClusterNet.
	IP string
}

// NodeOptions shapes a simulated node.
type NodeOptions struct {
	// ExtraTaints are added after the startup taint.
	ExtraTaints []corev1.Taint
	// Labels are added to the Node.
	Labels map[string]string
	// NoStartupTaint creates the node without the startup taint.
	NoStartupTaint bool
}

// CreateNode creates a Node object carrying the startup taint and gives it
// the next free node address (10.213.1.1, 10.213.1.2, ...), recorded as its
// InternalIP in status.
func (cp *ControlPlane) CreateNode(ctx context.Context, name string, opts NodeOptions) (Node, error) {
	cp.mu.Lock()
	cp.nextNode++
	n := cp.nextNode
	cp.mu.Unlock()
	if n > 250*254 {
		return Node{}, fmt.Errorf("out of node addresses")
	}
	ip := fmt.Sprintf("10.213.%d.%d", 1+(n-1)/254, 1+(n-1)%254)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
	}
	for k, v := range opts.Labels {
		node.Labels[k] = v
	}
	if !opts.NoStartupTaint {
		node.Spec.Taints = append(node.Spec.Taints, StartupTaint)
	}
	node.Spec.Taints = append(node.Spec.Taints, opts.ExtraTaints...)
	created, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return Node{}, fmt.Errorf("create node %s: %w", name, err)
	}
	status := corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip},
			{Type: corev1.NodeHostName, Address: name},
		},
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	// A patch, not an update: in a cluster with controllers the node may
	// already have changed (a pod range assigned) since it was created.
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return Node{}, err
	}
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, created.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return Node{}, fmt.Errorf("set status of node %s: %w", name, err)
	}
	return Node{Name: name, IP: ip}, nil
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
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: created.Name, UID: created.UID},
	}}
	tok, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token request for %s/%s bound to pod %s: %w", namespace, serviceAccount, podName, err)
	}
	return tok.Status.Token, nil
}
