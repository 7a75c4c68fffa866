package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

	// reviewFn replaces review in tests that need a panicking policy.
	reviewFn func(body []byte, finalizer string) outcome

	answersOnce sync.Once
	answers     *answers
}

// outcome is what one review produced.
type outcome struct {
	status    int
	body      []byte
	operation string
	result    string
	uid       string
	reason    string
}

// buffers hold one request's body and answer; pooled, because a Node review
// is a few KiB and arrives thousands of times a second under load.
type buffers struct{ in, out []byte }

// maxPooledBytes keeps an unusually large body's buffer out of the pool, so
// one big request does not pin memory.
const maxPooledBytes = 64 << 10

var bufferPool = sync.Pool{New: func() any { return &buffers{in: make([]byte, 0, 8<<10), out: make([]byte, 0, 1<<10)} }}

// ServeHTTP decodes an AdmissionReview, applies MutateNode and answers. It
// never answers allowed:false: a panic becomes an allowed answer with no patch.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	bufs := bufferPool.Get().(*buffers)
	var out outcome
	body, err := readBody(bufs.in[:0], http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	bufs.in = body
	switch {
	case err != nil:
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			out = outcome{status: http.StatusRequestEntityTooLarge, result: ResultTooLarge, operation: opUnknown, reason: err.Error()}
		} else {
			out = outcome{status: http.StatusBadRequest, result: ResultBadRequest, operation: opUnknown, reason: "read body: " + err.Error()}
		}
		out.body = []byte(out.reason + "\n")
	case r.Method != http.MethodPost:
		out = outcome{status: http.StatusMethodNotAllowed, result: ResultBadRequest, operation: opUnknown, reason: "method " + r.Method, body: []byte("POST only\n")}
	default:
		out = h.safeReview(bufs.out[:0], body)
	}
	if out.status == http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(out.status)
	_, _ = w.Write(out.body)
	if cap(out.body) <= maxPooledBytes && cap(out.body) >= cap(bufs.out) {
		bufs.out = out.body[:0]
	}
	if cap(bufs.in) <= maxPooledBytes {
		bufferPool.Put(bufs)
	}
	h.Metrics.observe(out.operation, out.result, time.Since(start))
	if h.Log != nil && out.reason != "" {
		h.Log.Warn("admission request not handled normally", "result", out.result, "operation", out.operation, "uid", out.uid, "reason", out.reason, "status", out.status)
	}
}

// readBody appends r's contents to buf, sized up front from the declared
// length when there is one; limit is enforced by r.
func readBody(buf []byte, r io.Reader, declared, limit int64) ([]byte, error) {
	if declared > 0 && declared <= limit && int64(cap(buf)) <= declared {
		buf = make([]byte, 0, declared+1) // +1: the read that sees EOF needs room
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// safeReview is review with panics turned into an allowed answer.
func (h *Handler) safeReview(dst, body []byte) (out outcome) {
	defer func() {
		if p := recover(); p != nil {
			uid, apiVersion := peekUID(body)
			out = allowedOutcome(apiVersion, uid, opUnknown, ResultPanic, fmt.Sprintf("panic: %v", p))
		}
	}()
	if h.reviewFn != nil {
		return h.reviewFn(body, h.Finalizer)
	}
	return h.review(dst, body)
}

// review is what the handler does with a body, without its recover: the
// fast path where it is sure, else the typed decode. The answer is appended
// to dst.
func (h *Handler) review(dst, body []byte) outcome {
	h.answersOnce.Do(func() { h.answers = newAnswers(h.Finalizer) })
	if out, ok := fastReview(dst, body, h.answers); ok {
		return out
	}
	return fullReview(body, h.Finalizer)
}

// envelope is decoded first, leniently, to tell an AdmissionReview from
// anything else before the typed decode.
type envelope struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Request    json.RawMessage `json:"request"`
}

// fullReview turns a request body into an answer through the typed
// admission/v1 decode: the reference the fast path is held to, and the
// answer for every body the fast path is unsure of. It is pure and must not
// panic; the fuzz tests hold it to that without the recover in safeReview.
func fullReview(body []byte, finalizer string) outcome {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return badRequest("decode AdmissionReview: " + err.Error())
	}
	if env.Kind != "AdmissionReview" {
		return badRequest(fmt.Sprintf("kind %q is not AdmissionReview", env.Kind))
	}
	if env.APIVersion != admissionv1.SchemeGroupVersion.String() && env.APIVersion != "admission.k8s.io/v1beta1" {
		return badRequest(fmt.Sprintf("apiVersion %q is not admission.k8s.io/v1", env.APIVersion))
	}
	if len(bytes.TrimSpace(env.Request)) == 0 || bytes.Equal(bytes.TrimSpace(env.Request), []byte("null")) {
		return badRequest("AdmissionReview has no request")
	}
	var req admissionv1.AdmissionRequest
	if err := json.Unmarshal(env.Request, &req); err != nil {
		uid, _ := peekUID(body)
		return allowedOutcome(env.APIVersion, uid, opUnknown, ResultInvalid, "decode request: "+err.Error())
	}
	resp, result := MutateNode(&req, finalizer)
	out := outcome{status: http.StatusOK, operation: operationLabel(req.Operation), result: result, uid: string(req.UID)}
	if result == ResultInvalid {
		out.reason = "request allowed unchanged: not a well-formed Node CREATE"
	}
	out.body = encode(env.APIVersion, resp)
	return out
}

func badRequest(reason string) outcome {
	return outcome{status: http.StatusBadRequest, body: []byte(reason + "\n"), operation: opUnknown, result: ResultBadRequest, reason: reason}
}

func allowedOutcome(apiVersion, uid, operation, result, reason string) outcome {
	if apiVersion != "admission.k8s.io/v1beta1" {
		apiVersion = admissionv1.SchemeGroupVersion.String()
	}
	resp := &admissionv1.AdmissionResponse{UID: types.UID(uid), Allowed: true}
	return outcome{status: http.StatusOK, body: encode(apiVersion, resp), operation: operation, result: result, uid: uid, reason: reason}
}

// encode wraps resp in an AdmissionReview of the caller's apiVersion (v1 and
// v1beta1 responses have the same JSON shape).
func encode(apiVersion string, resp *admissionv1.AdmissionResponse) []byte {
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		// An AdmissionResponse of strings and bytes always marshals.
		return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}`)
	}
	return b
}

// peekUID digs the request UID out of a body whose request did not decode, so
// the answer still matches the question.
func peekUID(body []byte) (uid, apiVersion string) {
	var v struct {
		APIVersion string `json:"apiVersion"`
		Request    struct {
			UID json.RawMessage `json:"uid"`
		} `json:"request"`
	}
	_ = json.Unmarshal(body, &v)
	var s string
	if json.Unmarshal(v.Request.UID, &s) == nil {
		uid = s
	}
	return uid, v.APIVersion
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
