package remediate

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PoolLabels are the labels that name a node's pool when Config.PoolLabel
// is empty, first match wins: Karpenter's NodePool, then the managed node
// groups of EKS (and eksctl), GKE and AKS.
var PoolLabels = []string{
	"karpenter.sh/nodepool",
	"eks.amazonaws.com/nodegroup",
	"alpha.eksctl.io/nodegroup-name",
	"cloud.google.com/gke-nodepool",
	"kubernetes.azure.com/agentpool",
}

// pool names the node pool n belongs to for the circuit breaker: the value
// of Config.PoolLabel, or of the first of PoolLabels it carries. Nodes with
// none share the pool "".
func (c *Controller) pool(n *corev1.Node) string {
	if c.cfg.PoolLabel != "" {
		return n.Labels[c.cfg.PoolLabel]
	}
	for _, key := range PoolLabels {
		if v, ok := n.Labels[key]; ok {
			return key + "=" + v
		}
	}
	return ""
}

// breakers are the circuit breakers of one leadership, one per pool: a
// broken pool beside a healthy one stays stopped, because only a new node of
// its own pool that verifies closes its breaker.
type breakers struct {
	cfg Breaker
	by  map[string]*breaker
}

func newBreakers(cfg Breaker) *breakers {
	return &breakers{cfg: cfg, by: map[string]*breaker{}}
}

// of returns pool's breaker, closed when new.
func (b *breakers) of(pool string) *breaker {
	br, ok := b.by[pool]
	if !ok {
		br = &breaker{cfg: b.cfg}
		b.by[pool] = br
	}
	return br
}

// open counts the pools whose breaker is open.
func (b *breakers) open() int {
	n := 0
	for _, br := range b.by {
		if br.open {
			n++
		}
	}
	return n
}

// rebuild gives a new leader the breakers the cluster shows instead of
// closed ones. A failure of its pool is each never-verified node in nodes
// that an earlier leader marked as replacing (still going away), or that is
// older than the deadline by its creationTimestamp; counted oldest first,
// and not again when this replica's own deadline for the node passes. The
// API server's clock may only open a breaker this way, which stops
// deletions; it never makes a node due for one. It returns the pools it
// opened.
func (c *Controller) rebuild(nodes []*corev1.Node, now time.Time) []string {
	var failed []*corev1.Node
	for _, n := range nodes {
		_, marked := c.validMark(n)
		if c.neverVerified(n) && (marked || (n.DeletionTimestamp == nil && now.Sub(n.CreationTimestamp.Time) >= c.cfg.Deadline)) {
			failed = append(failed, n)
		}
	}
	sort.Slice(failed, func(i, j int) bool {
		if !failed[i].CreationTimestamp.Equal(&failed[j].CreationTimestamp) {
			return failed[i].CreationTimestamp.Before(&failed[j].CreationTimestamp)
		}
		return failed[i].Name < failed[j].Name
	})
	var opened []string
	for _, n := range failed {
		c.obs.judge(n, now)
		pool := c.pool(n)
		if c.brks.of(pool).record(true) {
			opened = append(opened, pool)
		}
	}
	return opened
}
