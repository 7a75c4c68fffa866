// Package admission holds the webhook's admission policy and the HTTP handler
// that serves it.
package admission

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
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

// nodeFields reads the part of a Node the policy needs. Keys match exactly,
// as JSON patch paths and the API server do; encoding/json into a struct
// would also take "Metadata" or "FINALIZERS" and yield a patch whose path is
// missing. meta is nil when metadata is absent or null; finalizers is nil
// when the list is absent, "null" when it is null.
func nodeFields(raw []byte) (kind, apiVersion string, meta, finalizers json.RawMessage, err error) {
	var top map[string]json.RawMessage
	if err = json.Unmarshal(raw, &top); err != nil {
		return
	}
	if top == nil {
		return "", "", nil, nil, errors.New("object is null")
	}
	if v, ok := top["kind"]; ok {
		if err = json.Unmarshal(v, &kind); err != nil {
			return
		}
	}
	if v, ok := top["apiVersion"]; ok {
		if err = json.Unmarshal(v, &apiVersion); err != nil {
			return
		}
	}
	meta = top["metadata"]
	if meta == nil || string(meta) == "null" {
		return kind, apiVersion, nil, nil, nil
	}
	var m map[string]json.RawMessage
	if err = json.Unmarshal(meta, &m); err != nil {
		return
	}
	return kind, apiVersion, meta, m["finalizers"], nil
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
	kind, apiVersion, meta, finalizers, err := nodeFields(req.Object.Raw)
	if err != nil {
		return resp, ResultInvalid
	}
	if (kind != "" && kind != "Node") || (apiVersion != "" && apiVersion != "v1") {
		return resp, ResultInvalid
	}
	if meta == nil {
		// No metadata to add a list to (an API server always sends it, but
		// a patch that cannot apply would fail the create).
		return patched(resp, jsonpatch.Add("/metadata", map[string][]string{"finalizers": {finalizer}}))
	}
	var op jsonpatch.Op
	switch raw := strings.TrimSpace(string(finalizers)); raw {
	case "", "null":
		op = jsonpatch.Add("/metadata/finalizers", []string{finalizer})
	default:
		var current []string
		if err := json.Unmarshal(finalizers, &current); err != nil {
			return resp, ResultInvalid
		}
		if slices.Contains(current, finalizer) {
			return resp, ResultPresent
		}
		op = jsonpatch.Add("/metadata/finalizers/-", finalizer)
	}
	return patched(resp, op)
}

func patched(resp *admissionv1.AdmissionResponse, op jsonpatch.Op) (*admissionv1.AdmissionResponse, string) {
	patch, err := jsonpatch.Marshal(op)
	if err != nil {
		return resp, ResultInvalid
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch = patch
	resp.PatchType = &pt
	return resp, ResultPatched
}
