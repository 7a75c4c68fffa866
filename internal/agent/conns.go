package agent

import (
	"context"
	"net"
	"sync"
)

// connTracker dials the agent's connections to the API server and keeps
// the open ones, so that a round the API server did not answer can drop
// those that are dead (DropStalled) and leave the live ones alone.
type connTracker struct {
	dial func(ctx context.Context, network, address string) (net.Conn, error)

	mu   sync.Mutex
	open map[*trackedConn]struct{}
}

func newConnTracker(dial func(ctx context.Context, network, address string) (net.Conn, error)) *connTracker {
	return &connTracker{dial: dial, open: map[*trackedConn]struct{}{}}
}

// DialContext dials and tracks the connection until it is closed.
func (t *connTracker) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := t.dial(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, tracker: t}
	t.mu.Lock()
	t.open[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

// DropStalled closes every tracked connection whose peer stopped
// acknowledging what was sent on it (see stalled), and returns how many.
func (t *connTracker) DropStalled() int {
	t.mu.Lock()
	conns := make([]*trackedConn, 0, len(t.open))
	for c := range t.open {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	dropped := 0
	for _, c := range conns {
		if stalled(c.Conn) {
			_ = c.Close()
			dropped++
		}
	}
	return dropped
}

type trackedConn struct {
	net.Conn
	tracker *connTracker
	once    sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.tracker.mu.Lock()
		delete(c.tracker.open, c)
		c.tracker.mu.Unlock()
	})
	return c.Conn.Close()
}
