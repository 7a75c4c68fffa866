//go:build e2e

package chart_test

import (
	"context"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestAgentReadsCSINodesAndResourceSlicesOnlyWithTheirGates: with the
// chart's RBAC, the agent's token may list and watch its node's CSINode and
// ResourceSlices (what the CSI drivers and DRA gates ask for) only while
// those gates name drivers, and may never write either.
func TestAgentReadsCSINodesAndResourceSlicesOnlyWithTheirGates(t *testing.T) {
	ctx := t.Context()
	const ns = "privilege-gates"
	node, err := cp.CreateNode(ctx, "privilege-gates-node", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.ApplyChartRBAC(context.Background(), ns); err != nil {
			t.Errorf("restore the chart's default RBAC: %v", err)
		}
	})
	onNode := func(field string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: field + "=" + node.Name}
	}
	for _, tc := range []struct {
		name string
		set  []string
		on   bool
	}{
		{"gates off (default)", nil, false},
		{"gates on", []string{"agent.gates.csiDrivers.drivers={csi.example.com}", "agent.gates.dra.drivers={gpu.example.com}"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := agentWithChartRBAC(t, ns, node.Name, tc.set...)
			reads := map[string]func() error{
				"list its CSINode": func() error {
					_, err := agent.StorageV1().CSINodes().List(ctx, onNode("metadata.name"))
					return err
				},
				"watch its CSINode": func() error {
					w, err := agent.StorageV1().CSINodes().Watch(ctx, onNode("metadata.name"))
					if err == nil {
						w.Stop()
					}
					return err
				},
				"list its ResourceSlices": func() error {
					_, err := agent.ResourceV1().ResourceSlices().List(ctx, onNode(resourcev1.ResourceSliceSelectorNodeName))
					return err
				},
				"watch its ResourceSlices": func() error {
					w, err := agent.ResourceV1().ResourceSlices().Watch(ctx, onNode(resourcev1.ResourceSliceSelectorNodeName))
					if err == nil {
						w.Stop()
					}
					return err
				},
			}
			// RBAC changes reach the authorizer asynchronously.
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return (reads["list its CSINode"]() == nil) == tc.on, nil
			}); err != nil {
				t.Fatalf("list CSINodes allowed = %v, want %v", !tc.on, tc.on)
			}
			for what, read := range reads {
				if err := read(); (err == nil) != tc.on || (err != nil && !apierrors.IsForbidden(err)) {
					t.Errorf("%s: err = %v, want allowed %v (else Forbidden)", what, err, tc.on)
				}
			}
			_, err = agent.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}, metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("create its CSINode: err = %v, want Forbidden", err)
			}
			_, err = agent.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: node.Name + "-gpu"},
				Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: &node.Name,
					Pool: resourcev1.ResourcePool{Name: node.Name, ResourceSliceCount: 1}},
			}, metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("create a ResourceSlice for its node: err = %v, want Forbidden", err)
			}
		})
	}
}
