package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// sharedServer is Options.SharedListener's server: one listener on every
// local address, each request handed to the agent of the node whose address
// it was sent to.
type sharedServer struct {
	ln   net.Listener
	srv  *http.Server
	done chan error

	mu     sync.RWMutex
	byAddr map[netip.Addr]http.Handler
}

func listenShared(addr string) (*sharedServer, error) {
	ln, err := metricsserver.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("the fleet's shared metrics listener: %w", err)
	}
	s := &sharedServer{ln: ln, byAddr: map[netip.Addr]http.Handler{}, done: make(chan error, 1)}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

func (s *sharedServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var h http.Handler
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(local.String()); err == nil {
			s.mu.RLock()
			h = s.byAddr[ap.Addr().Unmap()]
			s.mu.RUnlock()
		}
	}
	if h == nil {
		http.Error(w, "no simulated agent on this address", http.StatusNotFound)
		return
	}
	h.ServeHTTP(w, r)
}

// add answers node's addresses with h.
func (s *sharedServer) add(node harness.Node, h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ip := range nodeIPs(node) {
		s.byAddr[ip] = h
	}
}

// remove stops answering node's addresses.
func (s *sharedServer) remove(node harness.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ip := range nodeIPs(node) {
		delete(s.byAddr, ip)
	}
}

func nodeIPs(node harness.Node) []netip.Addr {
	ips := node.IPs
	if len(ips) == 0 {
		ips = []string{node.IP}
	}
	var out []netip.Addr
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// close shuts the server down within a second.
func (s *sharedServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down the fleet's shared metrics listener: %w", err)
	}
	if err := <-s.done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("the fleet's shared metrics listener: %w", err)
	}
	return nil
}
