package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// FuzzReview holds review (the handler without its recover) to its promise:
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
	f.Fuzz(func(t *testing.T, body []byte) {
		out := review(body, fin)
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
		var before, after corev1.Node
		_ = json.Unmarshal(env.Request.Object.Raw, &before)
		if err := json.Unmarshal(patched, &after); err != nil {
			// The input object may hold fields of the wrong type that the
			// policy never reads; only the finalizers matter here.
			var meta objectMeta
			if err := json.Unmarshal(patched, &meta); err != nil {
				t.Fatalf("patched object does not decode: %v: %s", err, patched)
			}
			var fins []string
			if err := json.Unmarshal(meta.Metadata.Finalizers, &fins); err != nil {
				t.Fatalf("patched finalizers do not decode: %v: %s", err, patched)
			}
			after.Finalizers = fins
		}
		if n := count(after.Finalizers, fin); n != 1 {
			t.Fatalf("finalizer present %d times after patch: %s", n, patched)
		}
		if !bytes.Contains(patched, []byte(fin)) || !slices.Equal(without(after.Finalizers, fin), without(before.Finalizers, fin)) && len(before.Finalizers) > 0 {
			t.Fatalf("other finalizers changed: before %v after %v", before.Finalizers, after.Finalizers)
		}
	})
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
