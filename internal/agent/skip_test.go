package agent

import (
	"context"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestSkippedRoundDropsConnectionsOnlyWhenUnanswered: a round skipped
// because the API server gave no answer (a partition: requests time out)
// drops the connections to it, so that the first round after the partition
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
			f := newFakeCluster(testNode("n1", nil, verifiedLabels, nil))
			f.readyErr = tt.readyErr
			a, _ := startTestAgent(t, f, stubCheck{err: errDNS}, nil)
			a.loop.failures = 2
			a.loop.startupOver = true
			a.step(t.Context())
			if f.closes != tt.wantCloses {
				t.Errorf("CloseConnections called %d times, want %d", f.closes, tt.wantCloses)
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
