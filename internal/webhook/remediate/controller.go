package remediate

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// Controller is the remediation loop.
type Controller struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	cfg    Config
	log    *slog.Logger
	clock  clock.WithTicker

	// probe asks the API server whether it serves (an outage restarts every
	// node's time).
	probe func(context.Context) error

	// Touched by the scan loop only; obs and brks are new each leadership.
	obs       *observer
	brks      *breakers
	noted     map[types.UID]string    // last Event reason recorded per node, so a state is told once
	tripped   bool                    // fleet budget hold logged
	fleetFull bool                    // the agents' fleet budget was used up at the last scan
	refused   refusals                // the agents' fleet-budget refusals, as last read
	held      bool                    // an agent was refused by the fleet budget recently, at this scan's read
	suspend   suspend.State           // the suspend switch, as the watch showed it at this scan
	suspended string                  // the blocked reason it gives, "" when it does not hold
	down      bool                    // API server outage logged
	claimsLog map[string]bool         // NodeClaim API trouble ("absent", "forbidden") logged once
	retried   map[types.UID]time.Time // first sight of a valid mark, or its last retry
	freshHeld map[types.UID]string    // gate that held a node on the fresh read, logged once
	claimList *claimCache             // this scan's NodeClaims, listed once when needed

	metrics
}

// New registers the metrics; Lead runs the loop.
func New(client kubernetes.Interface, dyn dynamic.Interface, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Controller, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		client: client, dyn: dyn, cfg: cfg, log: log, clock: cfg.Clock,
		noted: map[types.UID]string{}, claimsLog: map[string]bool{}, retried: map[types.UID]time.Time{},
		freshHeld: map[types.UID]string{},
		metrics:   m,
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.probe = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}
	return c, nil
}
