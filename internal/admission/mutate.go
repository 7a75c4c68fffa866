// Package admission holds the webhook's admission policy and the HTTP handler
// that serves it.
package admission

import (
	"encoding/json"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
)

// Results recorded in node_cleanup_webhook_requests_total{result}.
const (
	// ResultPatched means the finalizer was added.
	ResultPatched = "patched"
	// ResultPresent means the Node already carried the finalizer.
	ResultPresent = "present"
	// ResultIgnored means the request was not a CREATE of a Node.
	ResultIgnored = "ignored"
	// ResultInvalid means the request could not be understood; it was allowed unchanged.
	ResultInvalid = "invalid"
	// ResultPanic means the handler panicked; the request was allowed unchanged.
	ResultPanic = "panic"
	// ResultBadRequest means the body was not an AdmissionReview (HTTP 400).
	ResultBadRequest = "bad_request"
	// ResultTooLarge means the body exceeded the size limit (HTTP 413).
	ResultTooLarge = "too_large"
)

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// objectMeta is the part of a Node the policy reads. Decoding only this keeps
// the handler cheap and makes any other field shape irrelevant.
type objectMeta struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		// Finalizers is a RawMessage so that a present-but-null list is told
		// apart from an absent one.
		Finalizers json.RawMessage `json:"finalizers"`
	} `json:"metadata"`
}

// MutateNode is the policy: for a CREATE of a core/v1 Node it returns a JSON
// patch that adds finalizer unless it is already there. It never denies; the
// second result says what happened, for metrics.
func MutateNode(req *admissionv1.AdmissionRequest, finalizer string) (*admissionv1.AdmissionResponse, string) {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation != admissionv1.Create || req.SubResource != "" ||
		req.Resource.Group != "" || req.Resource.Resource != "nodes" ||
		(req.Kind.Kind != "" && req.Kind.Kind != "Node") {
		return resp, ResultIgnored
	}
	if req.UID == "" {
		// The API server rejects an answer with the wrong UID anyway.
		return resp, ResultInvalid
	}
	var obj objectMeta
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return resp, ResultInvalid
	}
	if (obj.Kind != "" && obj.Kind != "Node") || (obj.APIVersion != "" && obj.APIVersion != "v1") {
		return resp, ResultInvalid
	}
	var ops []patchOp
	switch raw := strings.TrimSpace(string(obj.Metadata.Finalizers)); raw {
	case "", "null":
		ops = []patchOp{{Op: "add", Path: "/metadata/finalizers", Value: []string{finalizer}}}
	default:
		var current []string
		if err := json.Unmarshal(obj.Metadata.Finalizers, &current); err != nil {
			return resp, ResultInvalid
		}
		if slices.Contains(current, finalizer) {
			return resp, ResultPresent
		}
		ops = []patchOp{{Op: "add", Path: "/metadata/finalizers/-", Value: finalizer}}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return resp, ResultInvalid
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch = patch
	resp.PatchType = &pt
	return resp, ResultPatched
}
