package doctor

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
)

// MissedAdmission says, for status and doctor, which nodes joined without the
// webhook's admission while it added the startup taint (startuptaint.Missed,
// the webhook leader's own rule): no taint was decided for them, so they
// were not held for verification unless their creator tainted them. Said,
// not counted as a problem: nothing on the node is left to fix; the cause
// (the webhook down, its caBundle blank) is.
func MissedAdmission(nodes []corev1.Node) []string {
	ptrs := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		ptrs[i] = &nodes[i]
	}
	var out []string
	for _, name := range startuptaint.Missed(ptrs) {
		out = append(out, fmt.Sprintf("node %s joined without the webhook's admission (no %s annotation, created after nodes it admitted): "+
			"no startup taint was decided for it, so it was not held for verification unless its creator tainted it; "+
			"the webhook was down or not called (Event %s; check the webhook's pods and its MutatingWebhookConfiguration's caBundle)",
			name, api.StartupTaintAdmissionAnnotation, api.EventStartupTaintMissed))
	}
	return out
}
