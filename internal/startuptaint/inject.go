package startuptaint

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// Injector decides for the webhook's admission: Decide, with the NodePool
// of a node Karpenter launched read from Pools.
type Injector struct {
	Config Config
	// Pools reads NodePools; nil: none is ever known.
	Pools PoolReader
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
	return Decide(in.Config, node, pool)
}
