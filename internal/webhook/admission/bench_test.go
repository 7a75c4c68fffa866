package admission

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// benchReviewBody is the Node CREATE review test/bench/webhook sends.
func benchReviewBody(b testing.TB) []byte {
	b.Helper()
	raw, err := json.Marshal(&corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-23.ec2.internal", Labels: map[string]string{"kubernetes.io/hostname": "ip-10-0-1-23", "node.kubernetes.io/instance-type": "m6i.large", "topology.kubernetes.io/zone": "us-east-1a"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return reviewBody(b, &admissionv1.AdmissionRequest{
		UID: "705ab4f5-6393-11e8-b7cc-42010a800002", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource: nodesResource, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	})
}

// discardWriter is a ResponseWriter that keeps nothing, so the benchmark
// measures the handler rather than a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkServeHTTP is the handler's cost per Node CREATE, without TLS or
// the network; profile it with -cpuprofile / -memprofile.
func BenchmarkServeHTTP(b *testing.B) {
	body := benchReviewBody(b)
	h := &Handler{Finalizer: fin, Metrics: newMetrics(b, prometheus.NewRegistry())}
	rd := bytes.NewReader(body)
	req, _ := http.NewRequest(http.MethodPost, "/mutate-node", io.NopCloser(rd))
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rd.Reset(body)
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}
