package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
)

// DefaultMaxBodyBytes bounds a request body. A Node is a few KiB; the API
// server itself caps admission payloads far below this.
const DefaultMaxBodyBytes = 3 << 20

// Handler serves /mutate-node.
type Handler struct {
	// Finalizer is added to every new Node.
	Finalizer string
	// MaxBodyBytes bounds the request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Metrics records every request; nil records nothing.
	Metrics *Metrics
	// Log receives one line per unusual request; nil discards.
	Log *slog.Logger
	// StartupTaint, when set, also decides the startup taint of every new
	// Node (startuptaint.Decide) and marks the node with the decision.
	StartupTaint *startuptaint.Injector
	// PeerSlices, when set, names the agents' peer slices: every new Node
	// is annotated with the first its agent would follow (hint).
	PeerSlices PeerSliceNames

	// policy replaces MutateNode in tests that need a panicking policy.
	policy func(req *admissionv1.AdmissionRequest, finalizer string) (*admissionv1.AdmissionResponse, string)
}

// outcome is what one request produced: the answer and what to record.
type outcome struct {
	status    int
	body      []byte
	operation string
	result    string
	uid       string
	reason    string
}

// ServeHTTP reads an AdmissionReview, applies the policy and answers. It
// never answers allowed:false, which would block kubelet registration: a
// request it cannot make sense of, or a panic, is allowed with no patch.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	out := h.serve(w, r)
	if out.status == http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(out.status)
	_, _ = w.Write(out.body)
	h.Metrics.observe(out.operation, out.result, time.Since(start))
	if h.Log != nil && out.reason != "" {
		h.Log.Warn("admission request not handled normally", "result", out.result, "operation", out.operation, "uid", out.uid, "reason", out.reason, "status", out.status)
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) outcome {
	if r.Method != http.MethodPost {
		return failed(http.StatusMethodNotAllowed, "method "+r.Method+": POST only")
	}
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return failed(http.StatusRequestEntityTooLarge, err.Error())
		}
		return failed(http.StatusBadRequest, "read body: "+err.Error())
	}
	return h.review(r.Context(), body)
}

// review answers one request body. A panic in the policy becomes an allowed
// answer for the request's UID, recorded as ResultPanic.
func (h *Handler) review(ctx context.Context, body []byte) (out outcome) {
	var rev admissionv1.AdmissionReview
	defer func() {
		if p := recover(); p != nil {
			out = answer(allowedFor(rev.Request), opUnknown, ResultPanic, fmt.Sprintf("panic: %v", p))
		}
	}()
	err := json.Unmarshal(body, &rev)
	var typeErr *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &typeErr) {
		return failed(http.StatusBadRequest, "decode AdmissionReview: "+err.Error())
	}
	switch {
	case rev.Kind != "AdmissionReview":
		return failed(http.StatusBadRequest, fmt.Sprintf("kind %q is not AdmissionReview", rev.Kind))
	case rev.APIVersion != admissionv1.SchemeGroupVersion.String():
		// The chart registers admissionReviewVersions [v1] (and its admission
		// policy keeps it so), so the API server never sends v1beta1.
		return failed(http.StatusBadRequest, fmt.Sprintf("apiVersion %q is not admission.k8s.io/v1", rev.APIVersion))
	case rev.Request == nil:
		return failed(http.StatusBadRequest, "AdmissionReview has no request")
	case err != nil:
		// An AdmissionReview whose request has a member of the wrong type:
		// encoding/json filled what it could, which is enough for the UID.
		return answer(allowedFor(rev.Request), opUnknown, ResultInvalid, "decode request: "+err.Error())
	}
	policy := h.policy
	if policy == nil {
		policy = MutateNode
	}
	resp, result := policy(rev.Request, h.Finalizer)
	resp.UID = rev.Request.UID
	if h.StartupTaint != nil && (result == ResultPatched || result == ResultPresent) {
		h.inject(ctx, rev.Request, resp)
	}
	if h.PeerSlices != nil && (result == ResultPatched || result == ResultPresent) {
		h.hint(rev.Request, resp)
	}
	reason := ""
	if result == ResultInvalid {
		reason = "request allowed unchanged: not a well-formed Node CREATE"
	}
	return answer(resp, operationLabel(rev.Request.Operation), result, reason)
}

// allowedFor is the answer that changes nothing.
func allowedFor(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if req != nil {
		resp.UID = req.UID
	}
	return resp
}

// answer wraps resp in an admission.k8s.io/v1 AdmissionReview.
func answer(resp *admissionv1.AdmissionResponse, operation, result, reason string) outcome {
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		// A response of strings and bytes always marshals; if it did not,
		// a call error leaves the Node to the API server's failurePolicy.
		return outcome{status: http.StatusInternalServerError, body: []byte("encode answer\n"), operation: operation, result: ResultInvalid, uid: string(resp.UID), reason: "encode answer: " + err.Error()}
	}
	return outcome{status: http.StatusOK, body: body, operation: operation, result: result, uid: string(resp.UID), reason: reason}
}

// failed is a call error: the body is not an AdmissionReview we can answer.
func failed(status int, reason string) outcome {
	result := ResultBadRequest
	if status == http.StatusRequestEntityTooLarge {
		result = ResultTooLarge
	}
	return outcome{status: status, body: []byte(reason + "\n"), operation: opUnknown, result: result, reason: reason}
}

const opUnknown = "unknown"

// operationLabel bounds the operation label to the four real operations.
func operationLabel(op admissionv1.Operation) string {
	switch op {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
		return string(op)
	}
	return opUnknown
}
