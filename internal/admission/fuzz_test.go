package admission

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// FuzzReview holds Handler.review (the handler without its recover: fast
// path, else the typed decode) to its promise:
// no input panics it, and every 200 answer is an allowed AdmissionReview whose
// patch, applied to a Node, yields that Node with our finalizer exactly once.
func FuzzReview(f *testing.F) {
	f.Add(reviewBody(f, nodeCreate(f, node())))
	f.Add(reviewBody(f, nodeCreate(f, node("a/one", "b/two"))))
	f.Add(reviewBody(f, nodeCreate(f, node(fin))))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","resource":{"version":"v1","resource":"nodes"},"object":{"metadata":{"finalizers":null}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","resource":{"version":"v1","resource":"nodes"},"object":{"metadata":{"finalizers":[1,"x"]}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":null}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(``))
	h := &Handler{Finalizer: fin}
	f.Fuzz(func(t *testing.T, body []byte) {
		out := h.review(nil, body)
		switch out.status {
		case http.StatusBadRequest:
			return
		case http.StatusOK:
		default:
			t.Fatalf("status %d", out.status)
		}
		var rev admissionv1.AdmissionReview
		if err := json.Unmarshal(out.body, &rev); err != nil || rev.Response == nil {
			t.Fatalf("answer is not an AdmissionReview: %v: %s", err, out.body)
		}
		if !rev.Response.Allowed {
			t.Fatalf("denied: %s", out.body)
		}
		if rev.Response.Patch == nil {
			return
		}
		// A patch was produced, so the request decoded; apply it to its object.
		var env struct {
			Request admissionv1.AdmissionRequest `json:"request"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("patched a request that does not decode: %v", err)
		}
		patched := applyPatch(t, env.Request.Object.Raw, rev.Response)
		// Finalizers are read with exact keys, as JSON patch paths and the
		// API server read them; the object's other fields do not matter.
		before, after := finalizersOf(t, env.Request.Object.Raw), finalizersOf(t, patched)
		if n := count(after, fin); n != 1 {
			t.Fatalf("finalizer present %d times after patch: %s", n, patched)
		}
		if !slices.Equal(without(after, fin), without(before, fin)) {
			t.Fatalf("other finalizers changed: before %v after %v", before, after)
		}
	})
}

func finalizersOf(t *testing.T, obj []byte) []string {
	t.Helper()
	_, _, _, raw, err := nodeFields(obj)
	if err != nil {
		t.Fatalf("object does not decode: %v: %s", err, obj)
	}
	var fins []string
	if raw != nil {
		if err := json.Unmarshal(raw, &fins); err != nil {
			t.Fatalf("finalizers do not decode: %v: %s", err, obj)
		}
	}
	return fins
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func without(list []string, s string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(v string) bool { return v == s })
}
