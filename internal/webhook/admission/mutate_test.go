package admission

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const fin = "infra.894.io/node-cleanup"

var nodesResource = metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}

func nodeCreate(t testing.TB, node *corev1.Node) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(node)
	if err != nil {
		t.Fatal(err)
	}
	return &admissionv1.AdmissionRequest{
		UID:       "uid-1",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource:  nodesResource,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}
}

func node(finalizers ...string) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Finalizers: finalizers, Labels: map[string]string{"a": "b"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
	}
}

// applyPatch applies resp's patch to obj and returns the result, as the API server would.
func applyPatch(t testing.TB, obj []byte, resp *admissionv1.AdmissionResponse) []byte {
	t.Helper()
	if resp.Patch == nil {
		return obj
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type = %v, want JSONPatch", resp.PatchType)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("decode patch %s: %v", resp.Patch, err)
	}
	out, err := p.Apply(obj)
	if err != nil {
		t.Fatalf("apply patch %s: %v", resp.Patch, err)
	}
	return out
}

func TestMutateNode(t *testing.T) {
	tests := []struct {
		name       string
		node       *corev1.Node
		want       []string
		wantResult string
	}{
		{"adds the list when finalizers are absent", node(), []string{fin}, ResultPatched},
		{"appends to other finalizers and keeps them", node("a/one", "b/two"), []string{"a/one", "b/two", fin}, ResultPatched},
		{"no patch when already there", node(fin), []string{fin}, ResultPresent},
		{"no patch when already there among others", node("a/one", fin), []string{"a/one", fin}, ResultPresent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := nodeCreate(t, tt.node)
			resp, result := MutateNode(req, fin)
			if !resp.Allowed || resp.UID != req.UID {
				t.Fatalf("allowed=%v uid=%q, want allowed uid %q", resp.Allowed, resp.UID, req.UID)
			}
			if result != tt.wantResult {
				t.Errorf("result = %q, want %q", result, tt.wantResult)
			}
			if tt.wantResult == ResultPresent && resp.Patch != nil {
				t.Errorf("patch = %s, want none", resp.Patch)
			}
			var got corev1.Node
			if err := json.Unmarshal(applyPatch(t, req.Object.Raw, resp), &got); err != nil {
				t.Fatal(err)
			}
			want := tt.node.DeepCopy()
			want.Finalizers = tt.want
			if !reflect.DeepEqual(&got, want) {
				t.Errorf("patched node =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestMutateNodeNullFinalizers(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","finalizers":null}}`)
	req := &admissionv1.AdmissionRequest{UID: "u", Resource: nodesResource, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}
	resp, result := MutateNode(req, fin)
	if result != ResultPatched {
		t.Fatalf("result = %q", result)
	}
	var got corev1.Node
	if err := json.Unmarshal(applyPatch(t, raw, resp), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Finalizers, []string{fin}) {
		t.Errorf("finalizers = %v", got.Finalizers)
	}
}

func TestMutateNodeLeavesOtherRequestsAlone(t *testing.T) {
	base := func() *admissionv1.AdmissionRequest { return nodeCreate(t, node()) }
	tests := []struct {
		name       string
		edit       func(*admissionv1.AdmissionRequest)
		wantResult string
	}{
		{"update", func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update }, ResultIgnored},
		{"delete", func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Delete }, ResultIgnored},
		{"status subresource", func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" }, ResultIgnored},
		{"pods", func(r *admissionv1.AdmissionRequest) { r.Resource.Resource = "pods"; r.Kind.Kind = "Pod" }, ResultIgnored},
		{"other group", func(r *admissionv1.AdmissionRequest) { r.Resource.Group = "example.com" }, ResultIgnored},
		{"kind is not Node", func(r *admissionv1.AdmissionRequest) { r.Kind.Kind = "Pod" }, ResultIgnored},
		{"missing uid", func(r *admissionv1.AdmissionRequest) { r.UID = "" }, ResultInvalid},
		{"object not JSON", func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte("{nope") }, ResultInvalid},
		{"object missing", func(r *admissionv1.AdmissionRequest) { r.Object.Raw = nil }, ResultInvalid},
		{"object of another kind", func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"kind":"Pod","apiVersion":"v1"}`) }, ResultInvalid},
		{"finalizers not a list", func(r *admissionv1.AdmissionRequest) {
			r.Object.Raw = []byte(`{"kind":"Node","apiVersion":"v1","metadata":{"finalizers":"x"}}`)
		}, ResultInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := base()
			tt.edit(req)
			resp, result := MutateNode(req, fin)
			if !resp.Allowed {
				t.Fatal("denied")
			}
			if resp.Patch != nil || resp.PatchType != nil {
				t.Errorf("patch = %s, want none", resp.Patch)
			}
			if result != tt.wantResult {
				t.Errorf("result = %q, want %q", result, tt.wantResult)
			}
		})
	}
}

func TestMutateNodeAddsMissingMetadata(t *testing.T) {
	for name, raw := range map[string]string{
		"absent": `{"apiVersion":"v1","kind":"Node"}`,
		"null":   `{"apiVersion":"v1","kind":"Node","metadata":null}`,
	} {
		t.Run(name, func(t *testing.T) {
			req := &admissionv1.AdmissionRequest{UID: "u", Resource: nodesResource, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)}}
			resp, result := MutateNode(req, fin)
			if result != ResultPatched {
				t.Fatalf("result = %q", result)
			}
			var got corev1.Node
			if err := json.Unmarshal(applyPatch(t, []byte(raw), resp), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Finalizers, []string{fin}) {
				t.Errorf("finalizers = %v", got.Finalizers)
			}
		})
	}
}
