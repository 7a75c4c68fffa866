package admission

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
)

// injectOps are the patch operations that add the startup taint Decide
// chose and mark the node with the decision (api.StartupTaintAdmissionAnnotation),
// for the raw Node of a CREATE that MutateNode accepted. No ops when
// injection is off or the object cannot be read.
func injectOps(ctx context.Context, in *startuptaint.Injector, raw []byte) ([]jsonpatch.Op, string, startuptaint.Decision) {
	var top map[string]json.RawMessage
	var node corev1.Node
	if json.Unmarshal(raw, &top) != nil || top == nil || json.Unmarshal(raw, &node) != nil {
		return nil, "", startuptaint.Decision{Outcome: startuptaint.Off, Why: "unreadable object"}
	}
	d := in.Decide(ctx, &node)
	if d.Outcome == startuptaint.Off {
		return nil, node.Name, d
	}
	var ops []jsonpatch.Op
	if d.Taint != nil {
		spec, taints := member(top, "spec"), json.RawMessage(nil)
		if spec != nil {
			var m map[string]json.RawMessage
			if json.Unmarshal(spec, &m) != nil {
				return nil, node.Name, startuptaint.Decision{Outcome: startuptaint.Off, Why: "unreadable spec"}
			}
			taints = member(m, "taints")
		}
		switch {
		case spec == nil:
			ops = append(ops, jsonpatch.Add("/spec", map[string][]corev1.Taint{"taints": {*d.Taint}}))
		case taints == nil:
			ops = append(ops, jsonpatch.Add("/spec/taints", []corev1.Taint{*d.Taint}))
		default:
			ops = append(ops, jsonpatch.Add("/spec/taints/-", *d.Taint))
		}
	}
	// The metadata member exists: MutateNode's finalizer op creates it when
	// it was absent, and runs first.
	var annotations json.RawMessage
	if meta := member(top, "metadata"); meta != nil {
		var m map[string]json.RawMessage
		if json.Unmarshal(meta, &m) == nil {
			annotations = member(m, "annotations")
		}
	}
	ops = append(ops, annotationOp(annotations != nil, api.StartupTaintAdmissionAnnotation, string(d.Outcome)))
	return ops, node.Name, d
}

// member is m[key], nil when absent or null. Keys match exactly, as JSON
// patch paths do.
func member(m map[string]json.RawMessage, key string) json.RawMessage {
	v := m[key]
	if v == nil || strings.TrimSpace(string(v)) == "null" {
		return nil
	}
	return v
}

// appendOps adds ops to the JSON patch of resp (none yet, or MutateNode's).
func appendOps(resp *admissionv1.AdmissionResponse, ops []jsonpatch.Op) error {
	if len(ops) == 0 {
		return nil
	}
	var all []json.RawMessage
	if resp.Patch != nil {
		if err := json.Unmarshal(resp.Patch, &all); err != nil {
			return err
		}
	}
	for _, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			return err
		}
		all = append(all, b)
	}
	patch, err := json.Marshal(all)
	if err != nil {
		return err
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	return nil
}

// inject adds the startup taint's operations to resp, the answer to a Node
// CREATE that MutateNode accepted. A failure leaves resp as it was: the node
// is admitted with the finalizer alone, never refused.
func (h *Handler) inject(ctx context.Context, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
	ops, name, d := injectOps(ctx, h.StartupTaint, req.Object.Raw)
	if err := appendOps(resp, ops); err != nil {
		d = startuptaint.Decision{Outcome: startuptaint.Off, Why: "patch: " + err.Error()}
	}
	h.Metrics.observeStartupTaint(d.Outcome)
	if h.Log == nil || d.Outcome == startuptaint.Off {
		return
	}
	attrs := []any{"node", name, "outcome", string(d.Outcome), "why", d.Why}
	if d.Taint != nil {
		attrs = append(attrs, "taint", d.Taint.ToString())
	}
	level := slog.LevelDebug // the node is as its creator made it
	if d.Outcome == startuptaint.Added || d.Outcome == startuptaint.NoKey {
		level = slog.LevelInfo
	}
	h.Log.Log(ctx, level, "startup taint decided at node creation", attrs...)
}
