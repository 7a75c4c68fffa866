//go:build e2e

package chart_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/nodecleanup"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// Every ServiceAccount of ours may write only its own keys on a Node
// (docs/safety.md, "Design rules"): the chart's admission policies enforce
// it, and the tests here prove it against the real API server with the
// policies as the chart renders them.

// nodeWrite is one write to a node: a patch of type pt, on the status
// subresource when status is set.
type nodeWrite struct {
	pt     types.PatchType
	patch  string
	status bool
}

// merge is a merge patch of the node.
func merge(p string) nodeWrite { return nodeWrite{pt: types.MergePatchType, patch: p} }

// mergeStatus is a merge patch of the node's status subresource.
func mergeStatus(p string) nodeWrite {
	return nodeWrite{pt: types.MergePatchType, patch: p, status: true}
}

// jsonPatch is a JSON patch of the node.
func jsonPatch(t *testing.T, ops ...jsonpatch.Op) nodeWrite {
	return nodeWrite{pt: types.JSONPatchType, patch: mustPatch(t, ops...)}
}

// do sends w to node as c; dryRun writes nothing but passes admission.
func (w nodeWrite) do(ctx context.Context, c kubernetes.Interface, node string, dryRun bool) (*corev1.Node, error) {
	opts := metav1.PatchOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var sub []string
	if w.status {
		sub = []string{"status"}
	}
	return c.CoreV1().Nodes().Patch(ctx, node, w.pt, []byte(w.patch), opts, sub...)
}

// deniedByPolicy checks that w, which the API server accepts from an
// administrator (so it is a valid write), is refused from c by an admission
// policy whose message contains want. Both are dry runs: nothing changes,
// whatever the outcome.
func deniedByPolicy(t *testing.T, c kubernetes.Interface, node, what string, w nodeWrite, want string) {
	t.Helper()
	ctx := t.Context()
	if _, err := w.do(ctx, cp.Client, node, true); err != nil {
		t.Fatalf("%s: the write is refused from an administrator too, so it proves nothing: %v", what, err)
	}
	_, err := w.do(ctx, c, node, true)
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want denied", what)
	case !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), want):
		t.Errorf("%s: %v, want denied by the admission policy saying %q", what, err, want)
	}
}

// waitForDenial waits until the policy the API server compiles
// asynchronously denies w from c.
func waitForDenial(t *testing.T, c kubernetes.Interface, node string, w nodeWrite) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := w.do(ctx, c, node, true)
		return denied(err), nil
	}); err != nil {
		t.Fatalf("the admission policy never took effect: %s still allowed", w.patch)
	}
}

// nodeClaimOwner points a node at a NodeClaim that is not its own: what
// remediation would then delete.
const nodeClaimOwner = `{"metadata":{"ownerReferences":[{"apiVersion":"karpenter.sh/v1","kind":"NodeClaim","name":"someone-elses","uid":"6a3c2f0e-2a43-4c55-9a51-0d3b0c6f1e7a","controller":true}]}}`

// webhookOnNodes applies the chart's RBAC and policies rendered with set in
// ns, and returns a client of the webhook's ServiceAccount.
func webhookOnNodes(t *testing.T, ns string, set ...string) kubernetes.Interface {
	t.Helper()
	if err := cp.ApplyChartRBAC(t.Context(), ns, set...); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(t.Context(), ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	return clientFor(t, kubeconfig)
}

// TestWebhookWritesOnlyItsFinalizersAndAnnotations: with the chart's RBAC
// and policies, the webhook's ServiceAccount, which RBAC lets patch every
// Node, may add and remove its own finalizers (webhook.finalizer and the
// legacy names) and write its own annotations (the remediation mark, the
// cleanup status), with the very patches the webhook sends; every other
// change to a node is denied by the policy: labels, taints,
// spec.unschedulable, ownerReferences, a foreign finalizer added or
// removed, a foreign annotation added or removed.
func TestWebhookWritesOnlyItsFinalizersAndAnnotations(t *testing.T) {
	ctx := t.Context()
	const ns = "privilege-webhook-nodes"
	node, err := cp.CreateNode(ctx, "webhook-writes", harness.NodeOptions{
		Labels: map[string]string{"team": "infra"}, Annotations: map[string]string{"example.com/note": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	keep := merge(`{"metadata":{"finalizers":["example.com/keep"]}}`)
	if _, err := keep.do(ctx, cp.Client, node.Name, false); err != nil {
		t.Fatal(err)
	}
	webhook := webhookOnNodes(t, ns)
	waitForDenial(t, webhook, node.Name, merge(`{"metadata":{"labels":{"team":"web"}}}`))

	const (
		finalizers  = "may add and remove only its own finalizers"
		annotations = "may change only its own annotations"
		metadata    = "may not change a node's labels, ownerReferences or other metadata"
		spec        = "may not change a node's spec"
	)
	t.Run("every other field denied", func(t *testing.T) {
		for _, tc := range []struct {
			what  string
			write nodeWrite
			want  string
		}{
			{"a label changed", merge(`{"metadata":{"labels":{"team":"web"}}}`), metadata},
			{"a label added", merge(`{"metadata":{"labels":{"node-ready/verified":"true"}}}`), metadata},
			{"a label removed", merge(`{"metadata":{"labels":{"team":null}}}`), metadata},
			{"ownerReferences", merge(nodeClaimOwner), metadata},
			{"a foreign finalizer added", jsonPatch(t, jsonpatch.Add("/metadata/finalizers/-", "karpenter.sh/termination")), finalizers},
			{"a foreign finalizer removed", jsonPatch(t, jsonpatch.Test("/metadata/finalizers/0", "example.com/keep"), jsonpatch.Remove("/metadata/finalizers/0")), finalizers},
			{"a foreign annotation added", merge(`{"metadata":{"annotations":{"` + api.ProtectAnnotation + `":"true"}}}`), annotations},
			{"the bypass annotation added", merge(`{"metadata":{"annotations":{"` + api.SkipVerificationAnnotation + `":"true"}}}`), annotations},
			{"a foreign annotation removed", merge(`{"metadata":{"annotations":{"example.com/note":null}}}`), annotations},
			{"a taint removed", jsonPatch(t, jsonpatch.Remove("/spec/taints")), spec},
			{"a taint added", jsonPatch(t, jsonpatch.Add("/spec/taints/-", corev1.Taint{Key: "evil", Effect: corev1.TaintEffectNoExecute})), spec},
			{"spec.unschedulable", merge(`{"spec":{"unschedulable":true}}`), spec},
			{"spec.providerID", merge(`{"spec":{"providerID":"aws:///eu-west-1a/i-0123456789"}}`), spec},
		} {
			deniedByPolicy(t, webhook, node.Name, tc.what, tc.write, tc.want)
		}
		// RBAC already refuses the status subresource; the policy would too.
		if _, err := mergeStatus(`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`).do(ctx, webhook, node.Name, true); !denied(err) {
			t.Errorf("the webhook writing node status: err = %v, want denied", err)
		}
	})

	t.Run("its own finalizers and annotations allowed", func(t *testing.T) {
		get := func() *corev1.Node {
			t.Helper()
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		write := func(what string, w nodeWrite) {
			t.Helper()
			if _, err := w.do(ctx, webhook, node.Name, false); err != nil {
				t.Fatalf("the webhook's %s: %v", what, err)
			}
		}
		// Back-fill, as nodecleanup builds it.
		patch, err := nodecleanup.AddFinalizerPatch(get().Finalizers, api.Finalizer)
		if err != nil {
			t.Fatal(err)
		}
		write("finalizer back-fill", nodeWrite{pt: types.JSONPatchType, patch: string(patch)})
		// The cleanup status, as nodecleanup writes it.
		status, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": get().UID,
			"annotations": map[string]string{api.CleanupStatusAnnotation: `{"attempt":1,"plugins":{"log":"running"}}`}}})
		if err != nil {
			t.Fatal(err)
		}
		write("cleanup status", merge(string(status)))
		// The remediation mark and its removal, as remediate writes them.
		n := get()
		mark, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": n.UID, "resourceVersion": n.ResourceVersion,
			"annotations": map[string]string{api.ReplacingAnnotation: `{"by":"kube-node-ready-webhook"}`}}})
		if err != nil {
			t.Fatal(err)
		}
		write("replacing mark", merge(string(mark)))
		markPath := "/metadata/annotations/" + jsonpatch.EscapePointer(api.ReplacingAnnotation)
		write("replacing mark removed", jsonPatch(t, jsonpatch.Test("/metadata/uid", string(n.UID)),
			jsonpatch.Test(markPath, `{"by":"kube-node-ready-webhook"}`), jsonpatch.Remove(markPath)))
		// Removal after cleanup, as nodecleanup builds it.
		n = get()
		patch, err = nodecleanup.RemoveFinalizerPatch(n.UID, n.Finalizers, api.Finalizer)
		if err != nil || patch == nil {
			t.Fatalf("remove patch of %v: %s, %v", n.Finalizers, patch, err)
		}
		write("finalizer removal", nodeWrite{pt: types.JSONPatchType, patch: string(patch)})

		n = get()
		if !slices.Equal(n.Finalizers, []string{"example.com/keep"}) || n.Labels["team"] != "infra" || n.Annotations["example.com/note"] != "x" ||
			n.Annotations[api.CleanupStatusAnnotation] == "" || len(n.Spec.Taints) != 1 {
			t.Errorf("after the webhook's writes: finalizers %v, labels %v, annotations %v, taints %v", n.Finalizers, n.Labels, n.Annotations, n.Spec.Taints)
		}
	})

	t.Run("legacy names replaced and removed, nothing else", func(t *testing.T) {
		// After `helm upgrade --set webhook.finalizer=<new>` the previous
		// name is legacy: the webhook replaces it on live nodes.
		const renamed = "example.com/renamed-cleanup"
		webhook := webhookOnNodes(t, ns, "webhook.finalizer="+renamed, "webhook.legacyFinalizers={"+api.Finalizer+"}")
		legacy, err := cp.CreateNode(ctx, "webhook-writes-legacy", harness.NodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		set := merge(`{"metadata":{"finalizers":["` + api.Finalizer + `","example.com/keep"]}}`)
		if _, err := set.do(ctx, cp.Client, legacy.Name, false); err != nil {
			t.Fatal(err)
		}
		patch, err := nodecleanup.AddFinalizerPatch([]string{api.Finalizer, "example.com/keep"}, renamed, api.Finalizer)
		if err != nil {
			t.Fatal(err)
		}
		replace := nodeWrite{pt: types.JSONPatchType, patch: string(patch)}
		// The policy rendered with the new values replaces the previous one
		// asynchronously: wait until it allows the new name.
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := replace.do(ctx, webhook, legacy.Name, true)
			return err == nil, nil
		}); err != nil {
			t.Fatalf("the policy never allowed the renamed finalizer: %v", err)
		}
		deniedByPolicy(t, webhook, legacy.Name, "a foreign finalizer added", jsonPatch(t, jsonpatch.Add("/metadata/finalizers/-", "karpenter.sh/termination")), finalizers)
		deniedByPolicy(t, webhook, legacy.Name, "a name neither current nor legacy added", jsonPatch(t, jsonpatch.Add("/metadata/finalizers/-", "example.com/other-cleanup")), finalizers)
		replaced, err := replace.do(ctx, webhook, legacy.Name, false)
		if err != nil {
			t.Fatalf("the webhook replacing the legacy name: %v", err)
		}
		if !slices.Equal(replaced.Finalizers, []string{"example.com/keep", renamed}) {
			t.Errorf("finalizers after the replacement: %v", replaced.Finalizers)
		}
		patch, err = nodecleanup.RemoveFinalizerPatch(replaced.UID, replaced.Finalizers, renamed, api.Finalizer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (nodeWrite{pt: types.JSONPatchType, patch: string(patch)}).do(ctx, webhook, legacy.Name, false); err != nil {
			t.Errorf("the webhook removing its renamed finalizer: %v", err)
		}
	})
}

// TestRealWebhookWorksUnderItsNodePolicy: the webhook, run as a process
// with the chart's identity and policies, back-fills its finalizer and
// removes it once the node's cleanup is done, without a write refused, and
// leaves a foreign finalizer where it is. (test/e2e/cleanup and
// test/e2e/remediation run the rest of its writes under the same policy.)
func TestRealWebhookWorksUnderItsNodePolicy(t *testing.T) {
	ctx := t.Context()
	const ns, ip = "privilege-webhook-real", "10.213.0.63"
	webhook := webhookOnNodes(t, ns)
	node, err := cp.CreateNode(ctx, "webhook-real", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForDenial(t, webhook, node.Name, merge(`{"metadata":{"labels":{"team":"web"}}}`))
	keep := merge(`{"metadata":{"finalizers":["example.com/keep"]}}`)
	if _, err := keep.do(ctx, cp.Client, node.Name, false); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	w := cp.StartWebhook(t, "webhook-real", ip,
		"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name=webhook-real",
		"--webhook-config-name=", "--extra-sans="+ip, "--log-level=debug")
	w.WaitReady(t, 30*time.Second)
	cp.WaitNode(t, node.Name, 30*time.Second, "the finalizer back-filled", func(n *corev1.Node) bool {
		return slices.Equal(n.Finalizers, []string{"example.com/keep", api.Finalizer})
	})
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, node.Name, 30*time.Second, "cleaned up and our finalizer removed, the foreign one kept", func(n *corev1.Node) bool {
		return slices.Equal(n.Finalizers, []string{"example.com/keep"})
	})
	if logged := w.Tail(400); strings.Contains(logged, "ValidatingAdmissionPolicy") || strings.Contains(logged, "forbidden") {
		t.Errorf("the webhook had a write refused:\n%s", logged)
	}
}

// TestChartLegacyFinalizersAreOnlyOurs: the chart accepts as
// webhook.legacyFinalizers exactly the names the webhook's
// --legacy-finalizers accepts (api.ShippedFinalizers; the chart keeps its
// own copy, and this keeps the two the same), and refuses another
// controller's finalizer before anything reaches the cluster. Whatever the
// certificate mode, the webhook's node policy is rendered and lets it write
// its finalizer and the legacy names, and no other.
func TestChartLegacyFinalizersAreOnlyOurs(t *testing.T) {
	template := func(sets ...string) (string, error) {
		args := []string{"template", release, chart, "-n", namespace, "--kube-version", "1.36.0"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		return helm(t, args...)
	}
	const renamed = "example.com/renamed-cleanup"
	for _, name := range api.ShippedFinalizers() {
		out, err := template("webhook.finalizer="+renamed, "webhook.legacyFinalizers={"+name+"}")
		if err != nil {
			t.Errorf("helm template with the shipped name %s as legacy: %v\n%s", name, err, out)
			continue
		}
		if got, want := policyFinalizers(t, out), []string{renamed, name}; !slices.Equal(got, want) {
			t.Errorf("the webhook's node policy allows the finalizers %v, want %v", got, want)
		}
		if !strings.Contains(out, "- --legacy-finalizers="+name+"\n") {
			t.Errorf("the webhook is not given --legacy-finalizers=%s", name)
		}
	}
	for _, bad := range []string{"karpenter.sh/termination", "example.com/never-shipped"} {
		out, err := template("webhook.legacyFinalizers={" + bad + "}")
		if err == nil || !strings.Contains(out, "webhook.legacyFinalizers") || !strings.Contains(out, `"`+bad+`" is not a finalizer name kube-node-ready shipped`) {
			t.Errorf("helm template with %s as a legacy finalizer: err=%v, want refused naming it:\n%s", bad, err, out)
		}
	}
	for _, mode := range []string{"self-managed", "cert-manager"} {
		out, err := template("webhook.certificates.mode=" + mode)
		if err != nil {
			t.Fatalf("helm template in %s mode: %v\n%s", mode, err, out)
		}
		if got := policyFinalizers(t, out); !slices.Equal(got, []string{api.Finalizer}) {
			t.Errorf("%s mode: the webhook's node policy allows the finalizers %v, want only %s", mode, got, api.Finalizer)
		}
	}
	out, err := template("webhook.enabled=false")
	if err != nil {
		t.Fatalf("helm template without the webhook: %v\n%s", err, out)
	}
	if strings.Contains(out, "-node-writes") {
		t.Error("the webhook's node policy is rendered without the webhook")
	}
}

// policyFinalizers reads the finalizers variable of the rendered webhook
// node policy: a CEL list literal, which is also JSON.
func policyFinalizers(t *testing.T, rendered string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(rendered, "name: "+release+"-kube-node-ready-webhook-node-writes\n")
	if !ok {
		t.Fatal("the chart renders no webhook node policy")
	}
	_, rest, ok = strings.Cut(rest, "- name: finalizers\n")
	if !ok {
		t.Fatal("the webhook node policy has no finalizers variable")
	}
	line, _, _ := strings.Cut(rest, "\n")
	expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expression: ")
	if !ok {
		t.Fatalf("finalizers: %q", line)
	}
	var names []string
	if err := json.Unmarshal([]byte(strings.Trim(expr, "'")), &names); err != nil {
		t.Fatalf("finalizers %s: %v", expr, err)
	}
	return names
}
