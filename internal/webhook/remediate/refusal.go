package remediate

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// refusals follows the agents' fleet-budget refusals: the annotation the
// agent that holds the re-taint Lease writes when the budget refuses its
// re-taint (api.FleetBudgetRefusedAnnotation). Only a change of the value is
// read, dated on this controller's clock when seen: the agents' clocks and
// the time in the value are never trusted.
type refusals struct {
	value string    // last value seen
	at    time.Time // when this controller first saw it
	err   bool      // the last read failed (logged once)
}

// budgetRefused reads the re-taint Lease and reports whether an agent was
// refused a re-taint by the fleet budget within the last --unverified-deadline:
// the fleet is in, or has just left, a fault that filled the budget, and
// nothing is replaced. A value seen for the first time (a new leader, or a
// refusal since the last read) is dated now. A Lease that cannot be read
// holds too: without it the budget's state is unknown.
func (c *Controller) budgetRefused(ctx context.Context, now time.Time) (bool, error) {
	if c.cfg.RetaintLease == "" || c.cfg.Policy != PolicyReplace {
		return false, nil // report replaces nothing: nothing to hold
	}
	lease, err := c.client.CoordinationV1().Leases(c.cfg.Namespace).Get(ctx, c.cfg.RetaintLease, metav1.GetOptions{})
	value := ""
	switch {
	case apierrors.IsNotFound(err):
		// No agent ever took it: no re-taint was ever refused.
	case err != nil:
		if !c.refused.err {
			c.log.Warn("cannot read the agents' re-taint Lease; replacing nothing until it can be read",
				"lease", c.cfg.Namespace+"/"+c.cfg.RetaintLease, "error", err)
		}
		c.refused.err = true
		return true, fmt.Errorf("read Lease %s/%s: %w", c.cfg.Namespace, c.cfg.RetaintLease, err)
	default:
		value = lease.Annotations[api.FleetBudgetRefusedAnnotation]
	}
	c.refused.err = false
	if value != c.refused.value {
		c.refused.value, c.refused.at = value, now
	}
	return c.refused.value != "" && now.Sub(c.refused.at) < c.cfg.Deadline, nil
}
