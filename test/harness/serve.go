package harness

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// ServeHTTP serves h on addr (an address of the harness namespace, which
// processes on simulated nodes and pods on real nodes reach as they reach the
// API server) until the test ends: a stand-in for a receiver outside the
// cluster (a CMDB, a chat webhook).
func ServeHTTP(t testing.TB, addr string, h http.Handler) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}
