package remediate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// trim is the node informer's transform: of a Node it keeps what the
// decisions read from the cache and nothing else, so that the cache stays
// small when every node of a large cluster is unverified (the chart
// installed into a running cluster, or a fleet-wide fault): a cloud
// provider's Node carries some 60 labels, 30 images and kilobytes of
// managedFields (issue 35, R12). The keys kept follow the configuration
// (keptLabels, keptAnnotations, ours); every delete is decided again on a
// fresh read of the whole Node from the API server, never on this copy.
func (c *Controller) trim(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              n.Name,
			UID:               n.UID,
			ResourceVersion:   n.ResourceVersion, // Events name it; marks are written on fresh reads
			CreationTimestamp: n.CreationTimestamp,
			DeletionTimestamp: n.DeletionTimestamp,
			Labels:            only(n.Labels, c.keptLabels()),
			Annotations:       only(n.Annotations, c.keptAnnotations()),
		},
		Spec: corev1.NodeSpec{
			ProviderID: n.Spec.ProviderID, // a NodeClaim is matched to its node by it
			Taints:     c.ours(n.Spec.Taints),
		},
	}, nil
}

// keptLabels are the labels the decisions read: the agent's verified label
// and the node-pool label of the circuit breaker (--remediation-pool-label,
// else every one of PoolLabels, first match wins).
func (c *Controller) keptLabels() []string {
	pools := PoolLabels
	if c.cfg.PoolLabel != "" {
		pools = []string{c.cfg.PoolLabel}
	}
	return append([]string{c.cfg.VerifiedLabel}, pools...)
}

// keptAnnotations are the annotations the decisions read: the agent's
// bypass, this controller's replacing mark and the deletion protection.
func (c *Controller) keptAnnotations() []string {
	return []string{c.cfg.AgentSkipAnnotation, c.cfg.ReplacingAnnotation, c.cfg.ProtectAnnotation}
}

// ours keeps the taints with one of the agent's keys, configured or
// previous (state reads no other).
func (c *Controller) ours(taints []corev1.Taint) []corev1.Taint {
	var kept []corev1.Taint
	for _, t := range taints {
		if t.Key != "" && (slices.Contains(c.cfg.StartupTaints, t.Key) || slices.Contains(c.cfg.UnhealthyTaints, t.Key)) {
			kept = append(kept, t)
		}
	}
	return kept
}

// only returns the entries of m whose keys are in keys; nil when none.
func only(m map[string]string, keys []string) map[string]string {
	var kept map[string]string
	for _, k := range keys {
		v, ok := m[k]
		if k == "" || !ok {
			continue
		}
		if kept == nil {
			kept = make(map[string]string, len(keys))
		}
		kept[k] = v
	}
	return kept
}
