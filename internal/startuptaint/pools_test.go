package startuptaint

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// stalledPools answers only when its context ends, as an API server that
// does not answer would.
type stalledPools struct{ calls int }

func (p *stalledPools) StartupTaints(ctx context.Context, _ string) ([]corev1.Taint, error) {
	p.calls++
	<-ctx.Done()
	return nil, ctx.Err()
}

type declaredPools []corev1.Taint

func (p declaredPools) StartupTaints(context.Context, string) ([]corev1.Taint, error) { return p, nil }

type failingPools struct{}

func (failingPools) StartupTaints(context.Context, string) ([]corev1.Taint, error) {
	return nil, errors.New("nodepools.karpenter.sh is forbidden")
}

// TestNodePoolReadNeverStallsAdmission: the NodePool read of one admission
// is bounded by PoolTimeout, well inside the configuration's 2 s, and a
// read that fails or times out is a NodePool not known (a readiness.k8s.io/
// key, or none before Karpenter v1.13), never a refused or stalled node.
// NodePools are read only for a node Karpenter launched.
func TestNodePoolReadNeverStallsAdmission(t *testing.T) {
	karpenter := linuxNode(map[string]string{NodePoolLabel: "default"})
	stalled := &stalledPools{}
	in := &Injector{Config: config(), Pools: stalled}
	start := time.Now()
	d := in.Decide(context.Background(), karpenter)
	if took := time.Since(start); took > PoolTimeout+time.Second {
		t.Errorf("a stalled NodePool read held admission %s", took)
	}
	if d.Outcome != Added || d.Taint.Key != api.KarpenterStartupTaintKey {
		t.Errorf("stalled read: %s %v (%s), want added %s", d.Outcome, d.Taint, d.Why, api.KarpenterStartupTaintKey)
	}
	if in.Decide(context.Background(), linuxNode(nil)); stalled.calls != 1 {
		t.Errorf("NodePools read %d times, want once (only for the node Karpenter launched)", stalled.calls)
	}

	in = &Injector{Config: config(), Pools: failingPools{}}
	in.Config.KarpenterReadinessKeys = false
	if d := in.Decide(context.Background(), karpenter); d.Outcome != NoKey {
		t.Errorf("failed read before Karpenter v1.13: %s %v, want no-key", d.Outcome, d.Taint)
	}

	in = &Injector{Config: config(), Pools: declaredPools{seedTaint}}
	if d := in.Decide(context.Background(), karpenter); d.Outcome != Added || d.Taint.Key != seedTaint.Key {
		t.Errorf("declared %s: %s %v", seedTaint.Key, d.Outcome, d.Taint)
	}
}
