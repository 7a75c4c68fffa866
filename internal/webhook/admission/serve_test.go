package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
)

func reviewBody(t testing.TB, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t testing.TB, h http.Handler, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-node", bytes.NewReader(body)))
	return rec
}

func decodeReview(t testing.TB, b []byte) admissionv1.AdmissionReview {
	t.Helper()
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &rev); err != nil {
		t.Fatalf("answer is not an AdmissionReview: %v: %s", err, b)
	}
	if rev.Response == nil {
		t.Fatalf("answer has no response: %s", b)
	}
	return rev
}

func TestServeAddsFinalizer(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := &Handler{Finalizer: fin, Metrics: newMetrics(t, reg)}
	req := nodeCreate(t, node("a/one"))
	rec := post(t, h, reviewBody(t, req))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	rev := decodeReview(t, rec.Body.Bytes())
	if rev.APIVersion != "admission.k8s.io/v1" || rev.Kind != "AdmissionReview" {
		t.Errorf("answer type = %s %s", rev.APIVersion, rev.Kind)
	}
	if rev.Response.UID != req.UID || !rev.Response.Allowed {
		t.Errorf("uid=%q allowed=%v", rev.Response.UID, rev.Response.Allowed)
	}
	if got, want := string(rev.Response.Patch), `[{"op":"add","path":"/metadata/finalizers/-","value":"`+fin+`"}]`; got != want {
		t.Errorf("patch = %s, want %s", got, want)
	}
	if got := counterValue(t, h.Metrics.requests.WithLabelValues("CREATE", ResultPatched)); got != 1 {
		t.Errorf("requests_total{CREATE,patched} = %v, want 1", got)
	}
}

func TestServeBadInput(t *testing.T) {
	good := reviewBody(t, nodeCreate(t, node()))
	missingUID := nodeCreate(t, node())
	missingUID.UID = ""
	tests := []struct {
		name       string
		body       []byte
		method     string
		wantStatus int
		wantResult string
		wantUID    string
	}{
		{"malformed JSON", []byte(`{"apiVersion":`), "", http.StatusBadRequest, ResultBadRequest, ""},
		{"not an object", []byte(`[1,2,3]`), "", http.StatusBadRequest, ResultBadRequest, ""},
		{"empty body", nil, "", http.StatusBadRequest, ResultBadRequest, ""},
		{"another kind of object", []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}`), "", http.StatusBadRequest, ResultBadRequest, ""},
		{"wrong API version", bytes.Replace(good, []byte("admission.k8s.io/v1"), []byte("admission.k8s.io/v2"), 1), "", http.StatusBadRequest, ResultBadRequest, ""},
		{"v1beta1, which the chart does not register", bytes.Replace(good, []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v1beta1"`), 1), "", http.StatusBadRequest, ResultBadRequest, ""},
		{"no request", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), "", http.StatusBadRequest, ResultBadRequest, ""},
		{"request of wrong types", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-7","operation":5}}`), "", http.StatusOK, ResultInvalid, "u-7"},
		{"missing uid", reviewBody(t, missingUID), "", http.StatusOK, ResultInvalid, ""},
		{"enormous body", append(append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"`), bytes.Repeat([]byte("x"), 4<<20)...), `"}}`...), "", http.StatusRequestEntityTooLarge, ResultTooLarge, ""},
		{"GET", nil, http.MethodGet, http.StatusMethodNotAllowed, ResultBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := &Handler{Finalizer: fin, Metrics: newMetrics(t, reg)}
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, "/mutate-node", bytes.NewReader(tt.body)))
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if rec.Code == http.StatusOK {
				rev := decodeReview(t, rec.Body.Bytes())
				if !rev.Response.Allowed || rev.Response.Patch != nil {
					t.Errorf("allowed=%v patch=%s, want allowed without patch", rev.Response.Allowed, rev.Response.Patch)
				}
				if string(rev.Response.UID) != tt.wantUID {
					t.Errorf("uid = %q, want %q", rev.Response.UID, tt.wantUID)
				}
			}
			if got := counterValue(t, h.Metrics.requests.WithLabelValues(opUnknown, tt.wantResult)) +
				counterValue(t, h.Metrics.requests.WithLabelValues("CREATE", tt.wantResult)); got != 1 {
				t.Errorf("requests_total{result=%q} = %v, want 1", tt.wantResult, got)
			}
		})
	}
}

func TestServeReadsTheNodeWithExactKeys(t *testing.T) {
	tests := []struct {
		name, object, wantPath string
		wantFinalizers         []string
	}{
		{"no metadata", `{"apiVersion":"v1","kind":"Node"}`, "/metadata", []string{fin}},
		{"null metadata", `{"apiVersion":"v1","kind":"Node","metadata":null}`, "/metadata", []string{fin}},
		{"only a case-variant Metadata", `{"apiVersion":"v1","kind":"Node","Metadata":{"finalizers":["a/one"]}}`, "/metadata", []string{fin}},
		{"only a case-variant Finalizers", `{"apiVersion":"v1","kind":"Node","metadata":{"Finalizers":["a/one"]}}`, "/metadata/finalizers", []string{fin}},
		{"other finalizers", `{"apiVersion":"v1","kind":"Node","metadata":{"finalizers":["a/one"]}}`, "/metadata/finalizers/-", []string{"a/one", fin}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := nodeCreate(t, node())
			req.Object.Raw = []byte(tt.object)
			rec := post(t, &Handler{Finalizer: fin}, reviewBody(t, req))
			rev := decodeReview(t, rec.Body.Bytes())
			var ops []jsonpatch.Op
			if err := json.Unmarshal(rev.Response.Patch, &ops); err != nil || len(ops) != 1 || ops[0].Op != "add" || ops[0].Path != tt.wantPath {
				t.Fatalf("patch = %s, want one add of %s", rev.Response.Patch, tt.wantPath)
			}
			if got := finalizersOf(t, applyPatch(t, req.Object.Raw, rev.Response)); !slices.Equal(got, tt.wantFinalizers) {
				t.Errorf("finalizers after patch = %v, want %v", got, tt.wantFinalizers)
			}
		})
	}
}

func TestServeRecoversPanicAsAllowed(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := &Handler{Finalizer: fin, Metrics: newMetrics(t, reg), policy: func(*admissionv1.AdmissionRequest, string) (*admissionv1.AdmissionResponse, string) {
		panic("policy bug")
	}}
	rec := post(t, h, reviewBody(t, nodeCreate(t, node())))
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d: %s", rec.Code, rec.Body)
	}
	rev := decodeReview(t, rec.Body.Bytes())
	if !rev.Response.Allowed || rev.Response.UID != "uid-1" || rev.Response.Patch != nil {
		t.Errorf("answer after panic = %s, want allowed, uid-1, no patch", rec.Body)
	}
	if got := counterValue(t, h.Metrics.requests.WithLabelValues(opUnknown, ResultPanic)); got != 1 {
		t.Errorf("requests_total{result=panic} = %v, want 1", got)
	}
}

func TestOperationLabelIsBounded(t *testing.T) {
	for op, want := range map[admissionv1.Operation]string{"CREATE": "CREATE", "UPDATE": "UPDATE", "DELETE": "DELETE", "CONNECT": "CONNECT", "": opUnknown, admissionv1.Operation(strings.Repeat("x", 40)): opUnknown} {
		if got := operationLabel(op); got != want {
			t.Errorf("operationLabel(%q) = %q, want %q", op, got, want)
		}
	}
}

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
