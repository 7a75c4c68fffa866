package admission

import (
	"encoding/json"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
)

// PeerSliceNames are the names of the agents' peer Service's
// EndpointSlices as a watch holds them: nil until it has listed, so that
// admission never waits for them.
type PeerSliceNames interface {
	Names() []string
}

// hintOps is the operation that annotates the raw Node of a CREATE that
// MutateNode accepted with the slices its agent would follow first
// (api.PeerSlicesAnnotation), after the ops already in patch; none without
// names, or when the node's name cannot be read.
func hintOps(names []string, raw []byte, patch []byte) []jsonpatch.Op {
	if len(names) == 0 {
		return nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || top == nil {
		return nil
	}
	var meta map[string]json.RawMessage
	var name string
	if m := member(top, "metadata"); m == nil || json.Unmarshal(m, &meta) != nil || json.Unmarshal(member(meta, "name"), &name) != nil || name == "" {
		return nil
	}
	return []jsonpatch.Op{annotationOp(member(meta, "annotations") != nil || addsAnnotations(patch), api.PeerSlicesAnnotation, api.FormatPeerSlices(name, names))}
}

// annotationOp adds the annotation key=value: to the annotations when
// there are some (exist), else as the whole map.
func annotationOp(exist bool, key, value string) jsonpatch.Op {
	if exist {
		return jsonpatch.Add("/metadata/annotations/"+jsonpatch.EscapePointer(key), value)
	}
	return jsonpatch.Add("/metadata/annotations", map[string]string{key: value})
}

// addsAnnotations reports whether patch, ours so far, creates the
// annotations map.
func addsAnnotations(patch []byte) bool {
	var ops []struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	if json.Unmarshal(patch, &ops) != nil {
		return false
	}
	for _, op := range ops {
		if op.Op == "add" && op.Path == "/metadata/annotations" {
			return true
		}
	}
	return false
}

// hint adds the peer slices' annotation to resp, the answer to a Node
// CREATE that MutateNode accepted. Without names (the watch has not
// listed, or the Service has no slices yet) or on any failure, resp stays
// as it was: the hint is never worth a refused or delayed node.
func (h *Handler) hint(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
	names := h.PeerSlices.Names()
	if len(names) == 0 {
		h.Metrics.observeHint(HintNoNames)
		return
	}
	ops := hintOps(names, req.Object.Raw, resp.Patch)
	before, pt := resp.Patch, resp.PatchType
	if len(ops) == 0 || appendOps(resp, ops) != nil {
		resp.Patch, resp.PatchType = before, pt
		h.Metrics.observeHint(HintUnreadable)
		return
	}
	h.Metrics.observeHint(HintAdded)
}
