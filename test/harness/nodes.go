package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// StartupTaint is the taint every simulated and real node is created with:
// the default preset's, the one the chart's and the binaries' defaults
// remove.
var StartupTaint = corev1.Taint{Key: api.Default().StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// UnhealthyTaint is the default preset's unhealthy taint: what the agent
// re-taints with when nothing else is configured.
var UnhealthyTaint = corev1.Taint{Key: api.Default().UnhealthyTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// SeedStartupTaint is the seed startup taint (the "none" preset's, and the
// default of releases before the presets): a node carrying it is one
// created before the keys changed.
var SeedStartupTaint = corev1.Taint{Key: api.StartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// OurTaint reports whether key is a taint key of the project's: any
// preset's startup or unhealthy key (the seed keys among them).
func OurTaint(key string) bool {
	return slices.Contains(api.PreviousStartupTaintKeys(), key) || slices.Contains(api.PreviousUnhealthyTaintKeys(), key)
}

// startupTolerations are YAML flow items tolerating every preset's startup
// key, for the harness's own workloads that must run on unverified nodes
// (CoreDNS, cert-manager) whichever preset a test installs.
func startupTolerations() string {
	var items []string
	for _, key := range api.PreviousStartupTaintKeys() {
		items = append(items, "{key: "+key+", operator: Exists, effect: NoSchedule}")
	}
	return strings.Join(items, ", ")
}

// Node is a simulated node: a Node object plus the address the process that
// plays it binds to (its InternalIP, and its pod IP).
type Node struct {
	// Name is the Node object's name.
	Name string
	// IP is the node's own address inside ClusterNet (ClusterNet6 when IPv6
	// is the primary family).
	IP string
	// IPs are its addresses in every family of the plane, primary (IP) first.
	IPs []string
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
// the next free node address (10.213.1.1, 10.213.1.2, ...; in IPv6
// fd00:10:213:1::1, ...; one of each in dual-stack), recorded as its
// InternalIPs in status.
func (cp *ControlPlane) CreateNode(ctx context.Context, name string, opts NodeOptions) (Node, error) {
	ips, err := cp.newAddresses()
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
	var addresses []corev1.NodeAddress
	for _, ip := range ips {
		addresses = append(addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	status := corev1.NodeStatus{
		Addresses: append(addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name}),
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
	return Node{Name: name, IP: ips[0], IPs: ips}, nil
}

// NewAddress returns the next free address of the simulated nodes' range
// in the primary family (10.213.1.1, 10.213.1.2, ...): a node's, or a new
// pod IP for a process that replaces one (a rolling update gives the new
// pod a new address).
func (cp *ControlPlane) NewAddress() (string, error) {
	ips, err := cp.newAddresses()
	if err != nil {
		return "", err
	}
	return ips[0], nil
}

// newAddresses returns the next free simulated node's address in every
// family, primary first.
func (cp *ControlPlane) newAddresses() ([]string, error) {
	cp.mu.Lock()
	cp.nextNode++
	n := cp.nextNode
	cp.mu.Unlock()
	if n > 250*254 {
		return nil, fmt.Errorf("out of node addresses")
	}
	var ips []string
	for _, a := range cp.Families {
		if a.Family == corev1.IPv6Protocol {
			ips = append(ips, fmt.Sprintf("fd00:10:213:%x::%x", 1+(n-1)/254, 1+(n-1)%254))
		} else {
			ips = append(ips, fmt.Sprintf("10.213.%d.%d", 1+(n-1)/254, 1+(n-1)%254))
		}
	}
	return ips, nil
}

// NewNode is CreateNode for a test: an error fails it, and the node is
// removed when the test ends (RemoveNode).
func (cp *ControlPlane) NewNode(tb testing.TB, name string, opts NodeOptions) Node {
	tb.Helper()
	n, err := cp.CreateNode(tb.Context(), name, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cp.RemoveNode(tb, name) })
	return n
}

// RemoveNode clears the node's finalizers and deletes it, so that it really
// goes; a node already gone is fine. It works in a Cleanup function; an
// error fails tb.
func (cp *ControlPlane) RemoveNode(tb testing.TB, name string) {
	tb.Helper()
	ctx := context.Background()
	nodes := cp.Client.CoreV1().Nodes()
	if _, err := nodes.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		tb.Errorf("clear finalizers of node %s: %v", name, err)
	}
	if err := nodes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		tb.Errorf("delete node %s: %v", name, err)
	}
}

// GetNode reads the node (also in a Cleanup function); an error fails tb.
func (cp *ControlPlane) GetNode(tb testing.TB, name string) *corev1.Node {
	tb.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// NodeExists reports whether the node is there (being deleted or not); an
// error other than not found fails tb.
func (cp *ControlPlane) NodeExists(tb testing.TB, name string) bool {
	tb.Helper()
	_, err := cp.Client.CoreV1().Nodes().Get(tb.Context(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		tb.Fatal(err)
	}
	return err == nil
}

// WaitNodeGone waits until the node is deleted for good (not found).
func (cp *ControlPlane) WaitNodeGone(tb testing.TB, name string, timeout time.Duration) {
	tb.Helper()
	WaitFor(tb, timeout, "node "+name+" gone", func() bool { return !cp.NodeExists(tb, name) })
}
