package agent

import (
	"context"
	"errors"
	"sync"
)

// health is the agent's /readyz answer: written by the loop, read by the
// metrics server.
type health struct {
	mu         sync.Mutex
	roundsDone bool
	apiOK      bool
}

// set records that a round finished (done) and whether the API server
// answered in it.
func (h *health) set(done, apiOK bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.roundsDone = h.roundsDone || done
	h.apiOK = apiOK
}

// Ready reports whether a first round has finished and the API server was
// reachable in the last one: the /readyz answer.
func (a *Agent) Ready() error {
	a.health.mu.Lock()
	defer a.health.mu.Unlock()
	switch {
	case !a.health.roundsDone:
		return errors.New("no verification round finished yet")
	case !a.health.apiOK:
		return errors.New("API server not reachable in the last round")
	}
	return nil
}

func (a *Agent) apiReachable(ctx context.Context) bool {
	_, err := a.server.ServerVersion(ctx)
	return err == nil
}
