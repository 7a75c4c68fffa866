package admission

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
)

func injector() *startuptaint.Injector {
	startup := corev1.Taint{Key: api.CAStartupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	return &startuptaint.Injector{Config: startuptaint.Config{
		Inject:  true,
		Startup: startup,
		Ours:    api.PreviousStartupTaintKeys(),
		Agent: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
		KarpenterReadinessKeys: true,
	}}
}

// answerFor runs one request through the handler's review and returns the node as the API server would store it.
func answerFor(t *testing.T, h *Handler, req *admissionv1.AdmissionRequest) (*corev1.Node, *admissionv1.AdmissionResponse) {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	out := h.review(context.Background(), body)
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(out.body, &rev); err != nil {
		t.Fatalf("answer %s: %v", out.body, err)
	}
	if !rev.Response.Allowed {
		t.Fatalf("denied: %s", out.body)
	}
	var n corev1.Node
	if err := json.Unmarshal(applyPatch(t, req.Object.Raw, rev.Response), &n); err != nil {
		t.Fatal(err)
	}
	return &n, rev.Response
}

func TestInjectStartupTaint(t *testing.T) {
	linux := map[string]string{corev1.LabelOSStable: "linux"}
	tests := []struct {
		name    string
		raw     string
		taints  []string
		outcome string
	}{
		{"no spec, no annotations", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"kubernetes.io/os":"linux"}}}`, []string{api.CAStartupTaintKey}, "added"},
		{"no metadata finalizers, spec without taints", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"kubernetes.io/os":"linux"},"annotations":{"a":"b"}},"spec":{"podCIDR":"10.0.0.0/24"}}`, []string{api.CAStartupTaintKey}, "added"},
		{"taints null", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"kubernetes.io/os":"linux"},"annotations":null},"spec":{"taints":null}}`, []string{api.CAStartupTaintKey}, "added"},
		{"other taints kept", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"kubernetes.io/os":"linux"}},"spec":{"taints":[{"key":"x","effect":"NoSchedule"}]}}`, []string{"x", api.CAStartupTaintKey}, "added"},
		{"registered with the key: no second", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"kubernetes.io/os":"linux"}},"spec":{"taints":[{"key":"` + api.CAStartupTaintKey + `","value":"true","effect":"NoSchedule"}]}}`, []string{api.CAStartupTaintKey}, "present"},
		{"windows: none", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"kubernetes.io/os":"windows"}}}`, nil, "not-selected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := nodeCreate(t, &corev1.Node{})
			req.Object.Raw = []byte(tt.raw)
			n, _ := answerFor(t, &Handler{Finalizer: fin, StartupTaint: injector()}, req)
			var keys []string
			for _, tn := range n.Spec.Taints {
				keys = append(keys, tn.Key)
			}
			if !slices.Equal(keys, tt.taints) {
				t.Errorf("taints = %v, want %v", keys, tt.taints)
			}
			if got := n.Annotations[api.StartupTaintAdmissionAnnotation]; got != tt.outcome {
				t.Errorf("mark = %q, want %q", got, tt.outcome)
			}
			if !slices.Equal(n.Finalizers, []string{fin}) {
				t.Errorf("finalizers = %v", n.Finalizers)
			}
		})
	}
	t.Run("finalizer already there: taint and mark still", func(t *testing.T) {
		req := nodeCreate(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: linux, Finalizers: []string{fin}}})
		n, _ := answerFor(t, &Handler{Finalizer: fin, StartupTaint: injector()}, req)
		if len(n.Spec.Taints) != 1 || n.Annotations[api.StartupTaintAdmissionAnnotation] != "added" {
			t.Errorf("taints %v, annotations %v", n.Spec.Taints, n.Annotations)
		}
	})
	t.Run("update never adds", func(t *testing.T) {
		req := nodeCreate(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: linux}})
		req.Operation = admissionv1.Update
		_, resp := answerFor(t, &Handler{Finalizer: fin, StartupTaint: injector()}, req)
		if resp.Patch != nil {
			t.Errorf("patch on UPDATE: %s", resp.Patch)
		}
	})
	t.Run("off: finalizer only, no mark", func(t *testing.T) {
		in := injector()
		in.Config.Inject = false
		req := nodeCreate(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: linux}})
		n, _ := answerFor(t, &Handler{Finalizer: fin, StartupTaint: in}, req)
		if len(n.Spec.Taints) != 0 || len(n.Annotations) != 0 {
			t.Errorf("taints %v, annotations %v", n.Spec.Taints, n.Annotations)
		}
	})
}
