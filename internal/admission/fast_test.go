package admission

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Reviews the fast path must answer itself: what the API server sends.
func typicalReviews(t testing.TB) map[string][]byte {
	update := nodeCreate(t, node())
	update.Operation = "UPDATE"
	status := nodeCreate(t, node())
	status.SubResource = "status"
	noKind := nodeCreate(t, node())
	noKind.Object.Raw = []byte(`{"metadata":{"name":"n","finalizers":null}}`)
	return map[string][]byte{
		"finalizers absent":         reviewBody(t, nodeCreate(t, node())),
		"other finalizers":          reviewBody(t, nodeCreate(t, node("a/one", "b/two"))),
		"finalizer already there":   reviewBody(t, nodeCreate(t, node("a/one", fin))),
		"null finalizers, no kind":  reviewBody(t, noKind),
		"update":                    reviewBody(t, update),
		"status subresource":        reviewBody(t, status),
		"v1beta1":                   bytes.Replace(reviewBody(t, nodeCreate(t, node())), []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v1beta1"`), 1),
		"with user info and labels": reviewBody(t, withUser(nodeCreate(t, nodeWithAnnotations()))),
		"the benchmark's review":    benchReviewBody(t),
	}
}

func nodeWithAnnotations() *corev1.Node {
	n := node()
	n.Annotations = map[string]string{"note": "ünïcode & <html>", "esc": "tab\there \"quoted\""}
	return n
}

func TestFastPathAnswersTypicalReviews(t *testing.T) {
	a := newAnswers(fin)
	for name, body := range typicalReviews(t) {
		t.Run(name, func(t *testing.T) {
			fast, ok := fastReview(nil, body, a)
			if !ok {
				t.Fatal("fast path handed a typical review to the full decoder")
			}
			full := fullReview(body, fin)
			if fast.status != full.status || fast.result != full.result || fast.operation != full.operation || !bytes.Equal(fast.body, full.body) {
				t.Errorf("fast %d %s %s %s\nfull %d %s %s %s", fast.status, fast.operation, fast.result, fast.body, full.status, full.operation, full.result, full.body)
			}
		})
	}
}

// FuzzFastReview holds the fast path to the typed decoder: whenever it
// answers, its answer is byte for byte fullReview's.
func FuzzFastReview(f *testing.F) {
	for _, body := range typicalReviews(f) {
		f.Add(body)
	}
	good := string(reviewBody(f, nodeCreate(f, node("a/one"))))
	edit := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	for _, s := range []string{
		edit(`"uid":"uid-1"`, `"UID":"uid-1"`),
		edit(`"uid":"uid-1"`, `"uid":"uid-1","uid":"uid-2"`),
		edit(`"uid":"uid-1"`, `"uid":"u\u0069d<&>"`),
		edit(`"uid":"uid-1"`, `"uid":"ü"`),
		edit(`"uid":"uid-1"`, `"uid":null`),
		edit(`"uid":"uid-1"`, `"uid":""`),
		edit(`"uid":"uid-1"`, `"\u0075id":"uid-1"`),
		edit(`"operation":"CREATE"`, `"operation":"create"`),
		edit(`"operation":"CREATE"`, `"Operation":"UPDATE"`),
		edit(`"operation":"CREATE"`, `"operation":"CREATE","userInfo":{"username":5}`),
		edit(`"operation":"CREATE"`, `"operation":"CREATE","userInfo":{"groups":["a",null],"extra":{"k":["v"],"n":null}}`),
		edit(`"operation":"CREATE"`, `"operation":"CREATE","userInfo":{"extra":{"k":"v"}}`),
		edit(`"operation":"CREATE"`, `"operation":"CREATE","dryRun":"true"`),
		edit(`"operation":"CREATE"`, `"operation":"CREATE","dryRun":true,"name":null,"requestKind":{"kind":1}`),
		edit(`"operation":"CREATE"`, `"operation":"CREATE","ſubResource":"status"`),
		edit(`"resource":"nodes"`, `"resource":"nodes","Resource":"pods"`),
		edit(`"kind":"Node"`, `"kind":"Node","KIND":"Pod"`),
		edit(`"finalizers":["a/one"]`, `"finalizers":["a/one"],"Finalizers":[]`),
		edit(`"finalizers":["a/one"]`, `"finalizers":["infra.894.io\/node-cleanup"]`),
		edit(`"finalizers":["a/one"]`, `"finalizers":[null,1]`),
		edit(`"finalizers":["a/one"]`, `"finalizers":"a/one"`),
		edit(`"finalizers":["a/one"]`, `"finalizers":[]`),
		edit(`"metadata":{`, `"metadata":null,"metadata":{`),
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0","operation":"CREATE","resource":{"resource":"nodes"},"object":{}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0","operation":"CREATE","resource":{"resource":"nodes"},"object":{"metadata":null}}}`,
		edit(`"apiVersion":"admission.k8s.io/v1"`, `"apiVersion":"admission.k8s.io/v1","apiVersion":"v2"`),
		edit(`"kind":"AdmissionReview"`, `"kind":"AdmissionReview","request":null`),
		good + ` x`,
		good + "\n\t ",
		edit(`"a/one"`, `"a/one", 1e+5, -0.5E-3, true, false, {"x":[[]]}`),
		edit(`"a/one"`, `01`),
		edit(`"a/one"`, `"\uZZZZ"`),
		edit(`"a/one"`, "\"\x01\""),
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","resource":{"resource":"nodes"},"object":` + strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300) + `}}`,
	} {
		f.Add([]byte(s))
	}
	a := newAnswers(fin)
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := fastReview(nil, body, a)
		if !ok {
			return
		}
		full := fullReview(body, fin)
		if fast.status != full.status || fast.result != full.result || fast.operation != full.operation || !bytes.Equal(fast.body, full.body) {
			t.Fatalf("fast and full answers differ for %q\nfast %d %s %s %s\nfull %d %s %s %s", body,
				fast.status, fast.operation, fast.result, fast.body, full.status, full.operation, full.result, full.body)
		}
	})
}

// withUser fills the request members an API server sends but the policy
// does not read.
func withUser(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionRequest {
	req.UserInfo = authenticationv1.UserInfo{Username: "system:node:n1", UID: "u-9", Groups: []string{"system:nodes", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"X509SHA256=ab"}}}
	req.RequestKind = &req.Kind
	req.RequestResource = &req.Resource
	req.Name = "n1"
	req.DryRun = ptr.To(false)
	req.Options = runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)}
	return req
}

func TestServeReusesBuffersSafely(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := &Handler{Finalizer: fin, Metrics: NewMetrics(reg)}
	big := node("a/one")
	big.Labels = map[string]string{}
	for i := range 2000 {
		big.Labels[fmt.Sprintf("example.com/label-%d", i)] = strings.Repeat("v", 20)
	}
	for i, n := range []*corev1.Node{big, node(), big, node(fin), node()} {
		req := nodeCreate(t, n)
		req.UID = types.UID(fmt.Sprintf("uid-%d", i))
		rec := post(t, h, reviewBody(t, req))
		rev := decodeReview(t, rec.Body.Bytes())
		if rev.Response.UID != req.UID || !rev.Response.Allowed {
			t.Fatalf("request %d: answer %s", i, rec.Body)
		}
		if (rev.Response.Patch != nil) == slices.Contains(n.Finalizers, fin) {
			t.Errorf("request %d: patch %s for finalizers %v", i, rev.Response.Patch, n.Finalizers)
		}
	}
	if got := counterValue(t, h.Metrics.requests.WithLabelValues("CREATE", ResultPatched)); got != 4 {
		t.Errorf("requests_total{CREATE,patched} = %v, want 4", got)
	}
}
