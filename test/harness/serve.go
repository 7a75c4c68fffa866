package harness

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// Serve runs h on addr (a stand-in for an external service: a Portworx
// API, a chat webhook, a receiver) until the test ends, when it is shut
// down gracefully for up to 2 s, then closed.
func Serve(tb testing.TB, addr string, h http.Handler) {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
	})
}
