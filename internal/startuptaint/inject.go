package startuptaint

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// PoolReader reads the startup taints of a Karpenter NodePool.
type PoolReader interface {
	// StartupTaints returns spec.template.spec.startupTaints of the
	// NodePool called name.
	StartupTaints(ctx context.Context, name string) ([]corev1.Taint, error)
}

// PoolTimeout bounds the NodePool read of one admission request: the
// webhook answers within the configuration's timeoutSeconds (2 s) whatever
// the API server does.
const PoolTimeout = 500 * time.Millisecond

// Suspended: the operator's suspend switch (kubectl node-ready suspend) is
// on, or cannot be read: the startup taint Decide chose is not added.
const Suspended Outcome = "suspended"

// Switch is the operator's suspend switch as the watch last saw it
// (suspend.Switch): admission answers within its timeout, so it never
// reads the switch itself.
type Switch interface {
	State() suspend.State
}

// Injector decides for the webhook's admission: Decide, with the NodePool
// of a node Karpenter launched read from Pools, held by Suspend.
type Injector struct {
	Config Config
	// Pools reads NodePools; nil: none is ever known.
	Pools PoolReader
	// Suspend is the operator's suspend switch; nil: never suspended.
	Suspend Switch
}

// Decide reads what the decision needs and makes it.
func (in *Injector) Decide(ctx context.Context, node *corev1.Node) Decision {
	var pool NodePool
	if name, ok := node.Labels[NodePoolLabel]; ok && in.Config.Inject && in.Pools != nil {
		ctx, cancel := context.WithTimeout(ctx, PoolTimeout)
		defer cancel()
		if taints, err := in.Pools.StartupTaints(ctx, name); err == nil {
			pool = NodePool{Known: true, StartupTaints: taints}
		}
	}
	d := Decide(in.Config, node, pool)
	if d.Outcome == Added && in.Suspend != nil {
		// The node then joins without the taint: the safe direction, as
		// an untaint is, and its mark says why.
		if st := in.Suspend.State(); st.Holds() {
			return Decision{Outcome: Suspended, Why: d.Taint.Key + " would have been added, but " + st.Why()}
		}
	}
	return d
}
