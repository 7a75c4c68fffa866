package admission

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
)

// FuzzReview holds the handler to its promise: no input panics it (not even
// into its recover), it answers 200, 400 or 413 and never allowed:false, the
// answer carries the request's UID, and a patch, applied to the Node, yields
// that Node with our finalizer exactly once and its other finalizers kept.
func FuzzReview(f *testing.F) {
	f.Add(reviewBody(f, nodeCreate(f, node())))
	f.Add(reviewBody(f, nodeCreate(f, node("a/one", "b/two"))))
	f.Add(reviewBody(f, nodeCreate(f, node(fin))))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":null}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(``))
	good := string(reviewBody(f, nodeCreate(f, node("a/one"))))
	edit := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	bare := func(object string) string {
		return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","resource":{"version":"v1","resource":"nodes"},"object":` + object + `}}`
	}
	for _, s := range []string{
		// The object is read with exact keys: these need /metadata or
		// /metadata/finalizers added whole.
		bare(`{}`),
		bare(`{"metadata":null}`),
		bare(`{"Metadata":{"finalizers":["a/one"]}}`),
		bare(`{"metadata":{"Finalizers":["a/one"]}}`),
		bare(`{"metadata":{"finalizers":null}}`),
		bare(`{"metadata":{"finalizers":[1,"x"]}}`),
		bare(`{"metadata":{"finalizers":"a/one"}}`),
		edit(`"metadata":{`, `"metadata":null,"metadata":{`),
		edit(`"finalizers":["a/one"]`, `"finalizers":["a/one"],"Finalizers":[]`),
		edit(`"finalizers":["a/one"]`, `"finalizers":["infra.894.io\/node-cleanup"]`),
		edit(`"kind":"Node"`, `"kind":"Node","KIND":"Pod"`),
		// The review around it.
		edit(`"uid":"uid-1"`, `"UID":"uid-1"`),
		edit(`"uid":"uid-1"`, `"uid":"uid-1","uid":"uid-2"`),
		edit(`"uid":"uid-1"`, `"uid":null`),
		edit(`"operation":"CREATE"`, `"operation":"create"`),
		edit(`"operation":"CREATE"`, `"operation":"CREATE","subResource":"status"`),
		edit(`"operation":"CREATE"`, `"operation":"CREATE","userInfo":{"extra":{"k":"v"}}`),
		edit(`"resource":"nodes"`, `"resource":"nodes","Resource":"pods"`),
		edit(`"kind":"AdmissionReview"`, `"kind":"AdmissionReview","request":null`),
		good + ` x`,
		bare(strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300)),
	} {
		f.Add([]byte(s))
	}
	// With the peer slices' hint: its annotation never costs the finalizer.
	h := &Handler{Finalizer: fin, Metrics: newMetrics(f, prometheus.NewRegistry()), PeerSlices: sliceNames{"s-1", "s-2", "s-3"}}
	panics := h.Metrics.requests.WithLabelValues(opUnknown, ResultPanic)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := post(t, h, body)
		if counterValue(t, panics) != 0 {
			t.Fatalf("handler panicked: %s", rec.Body)
		}
		switch rec.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			return
		case http.StatusOK:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		rev := decodeReview(t, rec.Body.Bytes())
		if !rev.Response.Allowed {
			t.Fatalf("denied: %s", rec.Body)
		}
		var in admissionv1.AdmissionReview
		decodeErr := json.Unmarshal(body, &in)
		if decodeErr == nil && rev.Response.UID != in.Request.UID {
			t.Fatalf("answer uid %q, request uid %q", rev.Response.UID, in.Request.UID)
		}
		if rev.Response.Patch == nil {
			return
		}
		if decodeErr != nil {
			t.Fatalf("patched a request that does not decode: %v", decodeErr)
		}
		patched := applyPatch(t, in.Request.Object.Raw, rev.Response)
		// Finalizers are read with exact keys, as JSON patch paths and the
		// API server read them; the object's other fields do not matter.
		before, after := finalizersOf(t, in.Request.Object.Raw), finalizersOf(t, patched)
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
