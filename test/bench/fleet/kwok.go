package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// LeaseDuration is the KWOK fleet's node Lease duration, the kubelet's
// default (--node-lease-duration-seconds 40): KWOK renews each Lease every
// quarter of it, 10 s, as a kubelet does.
const LeaseDuration = 40

// StartKWOK runs KWOK on cp for the fleet's Nodes: it marks them Ready
// (node-fast Stage) and keeps them heart-beating, a Lease renewal every 10 s
// and a status update every 10 to 20 minutes, as kubelets do
// (heartbeat-with-lease Stage). Pods on them are left alone: the agents are
// simulated in this process.
func StartKWOK(cp *harness.ControlPlane) (*harness.Process, error) {
	return cp.StartKWOK(harness.KWOKOptions{
		Name:   "kwok-fleet",
		Stages: []string{harness.KWOKStageNodeFast, harness.KWOKStageNodeHeartbeat},
		Args:   []string{fmt.Sprintf("--node-lease-duration-seconds=%d", LeaseDuration)},
	})
}

// CreateKWOKNodes creates count Nodes named prefix-0, prefix-1, ... for KWOK
// to manage (StartKWOK), as CreateKWOKNode does, at most parallel at once.
func CreateKWOKNodes(ctx context.Context, cp *harness.ControlPlane, prefix string, count, parallel int) ([]harness.Node, error) {
	nodes := make([]harness.Node, count)
	err := parallelDo(ctx, parallel, count, func(ctx context.Context, i int) error {
		n, err := CreateKWOKNode(ctx, cp, fmt.Sprintf("%s-%d", prefix, i))
		nodes[i] = n
		return err
	})
	return nodes, err
}

// CreateKWOKNode creates a Node for KWOK to manage, with the startup taint,
// as a node joins, and an address of its own in the harness's ClusterNet for
// its simulated agent. It carries the label type=kwok.
func CreateKWOKNode(ctx context.Context, cp *harness.ControlPlane, name string) (harness.Node, error) {
	ip, err := cp.NewAddress()
	if err != nil {
		return harness.Node{}, err
	}
	key, value, _ := strings.Cut(harness.KWOKNodeAnnotation, "=")
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{corev1.LabelHostname: name, "type": "kwok"},
			Annotations: map[string]string{key: value},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{harness.StartupTaint}},
	}
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return harness.Node{}, fmt.Errorf("create node %s: %w", name, err)
	}
	return harness.Node{Name: name, IP: ip}, nil
}

// WaitKWOKFleet waits until want Nodes are Ready and as many node Leases are
// held (KWOK heart-beats for them), reading both with paged lists.
func WaitKWOKFleet(ctx context.Context, cp *harness.ControlPlane, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ready, leases, err := countReady(ctx, cp)
		if err != nil {
			return err
		}
		if ready >= want && leases >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kwok fleet: %d of %d nodes Ready, %d Leases after %s", ready, want, leases, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// countReady counts the Ready Nodes and the Leases in kube-node-lease.
func countReady(ctx context.Context, cp *harness.ControlPlane) (ready, leases int, err error) {
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return cp.Client.CoreV1().Nodes().List(ctx, o)
	})
	err = p.EachListItem(ctx, metav1.ListOptions{ResourceVersion: "0"}, func(obj runtime.Object) error {
		for _, c := range obj.(*corev1.Node).Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("list nodes: %w", err)
	}
	list, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, fmt.Errorf("list leases: %w", err)
	}
	return ready, len(list.Items), nil
}

// parallelDo runs do for 0..n-1, at most parallel at once; the first error
// stops starting more and is returned.
func parallelDo(ctx context.Context, parallel, n int, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i := range n {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := do(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// StaleLeases counts the Leases of the nodes named prefix-* not renewed
// within the last LeaseDuration: the nodes a node lifecycle controller would
// mark NotReady, because their (KWOK) kubelet's heartbeats fall behind on the
// API server. (The Leases of deleted nodes stay: the harness runs no garbage
// collector.)
func StaleLeases(ctx context.Context, cp *harness.ControlPlane, prefix string) (stale, total int, err error) {
	list, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, 0, fmt.Errorf("list leases: %w", err)
	}
	cutoff := time.Now().Add(-LeaseDuration * time.Second)
	for _, l := range list.Items {
		if !strings.HasPrefix(l.Name, prefix+"-") {
			continue
		}
		total++
		if l.Spec.RenewTime == nil || l.Spec.RenewTime.Time.Before(cutoff) {
			stale++
		}
	}
	return stale, total, nil
}
