package harness

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// StartupTaint is the taint every simulated node is created with.
var StartupTaint = corev1.Taint{Key: api.StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}

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
	// Annotations are set on the Node.
	Annotations map[string]string
	// NoStartupTaint creates the node without the startup taint.
	NoStartupTaint bool
}

// CreateNode creates a Node object carrying the startup taint and gives it
// the next free node address (10.213.1.1, 10.213.1.2, ...), recorded as its
// InternalIP in status.
func (cp *ControlPlane) CreateNode(ctx context.Context, name string, opts NodeOptions) (Node, error) {
	ip, err := cp.NewAddress()
	if err != nil {
		return Node{}, err
	}

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}, Annotations: opts.Annotations},
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

// NewAddress returns the next free address of the simulated nodes' range
// (10.213.1.1, 10.213.1.2, ...): a node's, or a new pod IP for a process
// that replaces one (a rolling update gives the new pod a new address).
func (cp *ControlPlane) NewAddress() (string, error) {
	cp.mu.Lock()
	cp.nextNode++
	n := cp.nextNode
	cp.mu.Unlock()
	if n > 250*254 {
		return "", fmt.Errorf("out of node addresses")
	}
	return fmt.Sprintf("10.213.%d.%d", 1+(n-1)/254, 1+(n-1)%254), nil
}
