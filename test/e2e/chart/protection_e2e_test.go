//go:build e2e

package chart_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const protectAnnotation = "infra.894.io/protect"

// TestDeletionProtection: with deletionProtection.enabled the chart's
// ValidatingAdmissionPolicy makes the real API server refuse `kubectl delete
// node` of an annotated node, saying how to proceed; other nodes, and the
// same node once the annotation is removed, are deleted as usual.
func TestDeletionProtection(t *testing.T) {
	ctx := t.Context()
	policy, err := helm(t, "template", release, chart, "-n", namespace, "--kube-version", "1.36.0",
		"--set", "deletionProtection.enabled=true", "--show-only", "templates/deletion-protection.yaml")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, policy)
	}
	cp.KubectlT(t, policy, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = cp.Kubectl(context.Background(), strings.NewReader(policy), "delete", "-f", "-") })

	// The API server loads a new policy within moments: wait until a
	// protected probe node is refused before relying on it.
	probe := 0
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		probe++
		name := fmt.Sprintf("protect-probe-%d", probe)
		if _, err := cp.CreateNode(ctx, name, harness.NodeOptions{Annotations: map[string]string{protectAnnotation: "true"}}); err != nil {
			return false, err
		}
		out, err := cp.Kubectl(ctx, nil, "delete", "node", name, "--wait=false")
		return err != nil && strings.Contains(out, "protected from deletion"), nil
	})
	if err != nil {
		t.Fatalf("the deletion protection policy never refused a protected node: %v", err)
	}

	protected, err := cp.CreateNode(ctx, "protected", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := cp.CreateNode(ctx, "unprotected", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp.KubectlT(t, "", "annotate", "node", protected.Name, protectAnnotation+"=true")
	out, err := cp.Kubectl(ctx, nil, "delete", "node", protected.Name, "--wait=false")
	want := "node protected is protected from deletion by the annotation infra.894.io/protect=true; to delete it, first run: kubectl annotate node protected infra.894.io/protect-"
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("kubectl delete node %s: err=%v, output %q; want it refused with %q", protected.Name, err, out, want)
	}
	if n, err := cp.Client.CoreV1().Nodes().Get(ctx, protected.Name, metav1.GetOptions{}); err != nil || n.DeletionTimestamp != nil {
		t.Fatalf("protected node after the refused delete: %v, deletionTimestamp %v", err, n.DeletionTimestamp)
	}
	cp.KubectlT(t, "", "delete", "node", plain.Name, "--wait=false")

	// Doing as the message says lets the delete through.
	cp.KubectlT(t, "", "annotate", "node", protected.Name, protectAnnotation+"-")
	cp.KubectlT(t, "", "delete", "node", protected.Name, "--wait=false")
	for _, name := range []string{protected.Name, plain.Name} {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && n.DeletionTimestamp != nil), nil
		})
		if err != nil {
			t.Errorf("node %s not deleted: %v", name, err)
		}
	}
}
