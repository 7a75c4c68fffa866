// Package metricsserver serves a binary's plain-HTTP /metrics, /healthz and
// /readyz, so both binaries answer scrapes and probes the same way.
package metricsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Endpoints is what the server answers.
type Endpoints struct {
	// Gatherer is what /metrics exposes.
	Gatherer prometheus.Gatherer
	// Ready returns why the process is not ready, which /readyz answers
	// with a 503; nil means ready, as does a nil Ready.
	Ready func() error
	// Degraded returns what works less than it should while the process is
	// still ready (a part that must not take the whole pod out of service,
	// such as the webhook's admission when its cleanup configuration is
	// invalid); /readyz answers 200 with it after "ok". Nil or "" adds nothing.
	Degraded func() string
	// Grace is how long requests in flight may finish once the server
	// shuts down.
	Grace time.Duration
	// ShutdownDelay is how long Serve keeps answering after ctx ends, with
	// /readyz failing, before it shuts down. Other pods that dial this port
	// (the agents' pod-to-pod check) learn that the pod is going from its
	// EndpointSlice, which is updated after the pod's deletion, not before
	// the kubelet stops it: a port that closes at once is a failure they
	// see in the meantime. Zero shuts down at once.
	ShutdownDelay time.Duration
	// Log receives the errors of gathering metrics; it is required.
	Log *slog.Logger
}

// Listen binds addr. Callers bind before starting anything else, so a port
// clash stops the binary at start-up, with the address named, rather than
// going unnoticed until it exits.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// net's own text repeats "listen tcp" and the address; keep its cause.
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// errShuttingDown is /readyz's answer during e.ShutdownDelay.
var errShuttingDown = errors.New("shutting down")

// Serve answers on ln until ctx ends, then for e.ShutdownDelay more with
// /readyz failing, then shuts down within e.Grace. It returns nil after a
// clean shutdown.
func Serve(ctx context.Context, ln net.Listener, e Endpoints) error {
	var stopping atomic.Bool
	if ready := e.Ready; e.ShutdownDelay > 0 {
		e.Ready = func() error {
			if stopping.Load() {
				return errShuttingDown
			}
			if ready != nil {
				return ready()
			}
			return nil
		}
	}
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	if e.ShutdownDelay > 0 {
		stopping.Store(true)
		e.Log.Info("stopping: still answering while this pod's endpoint is removed", "address", ln.Addr().String(),
			"shutdown_delay_seconds", e.ShutdownDelay.Seconds())
		select {
		case err := <-done:
			return fmt.Errorf("serve %s: %w", ln.Addr(), err)
		case <-time.After(e.ShutdownDelay):
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), e.Grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down %s: %w", ln.Addr(), err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Handler answers /metrics, /healthz and /readyz as Serve does, for a
// server of the caller's own.
func (e Endpoints) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(e.Log.Handler(), slog.LevelError)}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if e.Ready != nil {
			if err := e.Ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
		if e.Degraded != nil {
			if note := e.Degraded(); note != "" {
				fmt.Fprintln(w, "degraded: "+note)
			}
		}
	})
	return mux
}

// Bool is the value of a gauge that says yes (1) or no (0).
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
