package agent

import "github.com/kube-node-ready/kube-node-ready/internal/api"

// PeerSlicesHint is the node's api.PeerSlicesAnnotation as the agent's
// watch of its node last saw it; "" before the watch has the node. The
// checks' choice of peer slices starts from it (endpoints.PeerSlices.Hint).
func (a *Agent) PeerSlicesHint() string {
	if n := a.view.node(); n != nil {
		return n.Annotations[api.PeerSlicesAnnotation]
	}
	return ""
}
