package agent

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestSkippedRoundDropsConnectionsOnlyWhenUnanswered: a round skipped
// because the API server gave no answer (a partition: requests time out)
// drops the connections to it that stalled (conns_test.go tells which), so
// that the first round after the partition
// heals dials anew instead of waiting on a connection that lost packets; a
// round skipped on an answer (503 while the server starts) keeps them.
func TestSkippedRoundDropsConnectionsOnlyWhenUnanswered(t *testing.T) {
	tests := []struct {
		name       string
		readyErr   error
		wantCloses int
	}{
		{"no answer: connections dropped", &url.Error{Op: "Get", URL: "https://10.96.0.1/readyz", Err: context.DeadlineExceeded}, 1},
		{"an answer (503): connections kept", apierrors.NewServiceUnavailable("starting"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
			f.readyErr = tt.readyErr
			a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, nil)
			a.loop.failures = 2
			a.loop.startupOver = true
			a.step(t.Context())
			if f.closes != tt.wantCloses {
				t.Errorf("DropStalledConnections called %d times, want %d", f.closes, tt.wantCloses)
			}
			if a.loop.failures != 0 {
				t.Errorf("consecutive failures = %d after a skipped round, want 0", a.loop.failures)
			}
			if got := f.node("n1"); len(got.Spec.Taints) != 0 || got.Labels["node-ready/verified"] != "true" {
				t.Errorf("node changed by a skipped round: taints %v labels %v", got.Spec.Taints, got.Labels)
			}
		})
	}
}

// namedCheck is a check of a given name that fails with err.
type namedCheck struct {
	name string
	err  error
}

func (c namedCheck) Name() string              { return c.name }
func (c namedCheck) Run(context.Context) error { return c.err }

// TestThrottledReadIsAControlPlaneFault: an API server that answers /readyz
// (exempt from its flow control) but holds the api check's read of the node
// past the check's timeout (queued: overloaded, or its flow control starves
// the agents) is a control-plane fault, not the node's: the round is skipped
// and counts toward no re-taint, and the connections, which just answered,
// are kept. A read refused with a status (403) still counts.
func TestThrottledReadIsAControlPlaneFault(t *testing.T) {
	timedOut := &url.Error{Op: "Get", URL: "https://10.96.0.1/api/v1/nodes/n1?resourceVersion=0", Err: context.DeadlineExceeded}
	tests := []struct {
		name        string
		err         error
		wantSkipped bool
	}{
		{"read held past the timeout: skipped", timedOut, true},
		{"read refused (403): counted", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("no")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t, testNode("n1", nil, verifiedLabels, nil))
			a, _ := startTestAgent(t, f, namedCheck{name: "api", err: tt.err}, func(c *Config) { c.Continuous = []string{"api"} })
			a.loop.failures = 2
			a.loop.startupOver = true
			a.step(t.Context())
			skipped := testutil.ToFloat64(a.metrics.skippedRounds) == 1
			if skipped != tt.wantSkipped {
				t.Errorf("round skipped = %v, want %v", skipped, tt.wantSkipped)
			}
			if f.closes != 0 {
				t.Errorf("DropStalledConnections called %d times, want 0: /readyz answered", f.closes)
			}
			wantFailures := 3
			if tt.wantSkipped {
				wantFailures = 0
			}
			if a.loop.failures != wantFailures {
				t.Errorf("consecutive failures = %d, want %d", a.loop.failures, wantFailures)
			}
			if got := f.node("n1"); tt.wantSkipped && (len(got.Spec.Taints) != 0 || got.Labels["node-ready/verified"] != "true") {
				t.Errorf("node changed by a skipped round: taints %v labels %v", got.Spec.Taints, got.Labels)
			}
		})
	}
}
