package metricsserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var discard = slog.New(slog.DiscardHandler)

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_gauge", Help: "A gauge."})
	g.Set(3)
	reg.MustRegister(g)
	notReady := errors.New("no certificate yet")
	tests := []struct {
		name       string
		ready      func() error
		degraded   func() string
		path       string
		wantStatus int
		wantBody   string
	}{
		{name: "metrics from the gatherer", path: "/metrics", wantStatus: http.StatusOK, wantBody: "test_gauge 3"},
		{name: "healthz while alive", ready: func() error { return notReady }, path: "/healthz", wantStatus: http.StatusOK, wantBody: "ok"},
		{name: "readyz when ready", ready: func() error { return nil }, path: "/readyz", wantStatus: http.StatusOK, wantBody: "ok"},
		{name: "readyz without a Ready func", path: "/readyz", wantStatus: http.StatusOK, wantBody: "ok"},
		{name: "readyz says why not", ready: func() error { return notReady }, path: "/readyz", wantStatus: http.StatusServiceUnavailable, wantBody: "no certificate yet"},
		{name: "readyz ready but degraded says what", ready: func() error { return nil }, degraded: func() string { return "cleanup configuration invalid" }, path: "/readyz", wantStatus: http.StatusOK, wantBody: "ok\ndegraded: cleanup configuration invalid"},
		{name: "unknown path", path: "/nope", wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := start(t, Endpoints{Gatherer: reg, Ready: tt.ready, Degraded: tt.degraded, Grace: 5 * time.Second, Log: discard})
			resp, err := http.Get("http://" + addr + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tt.path, resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

// start serves e on a free port until the test ends, and checks the
// shutdown is clean.
func start(t *testing.T, e Endpoints) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, e) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v after ctx ended, want nil", err)
		}
	})
	return ln.Addr().String()
}

func TestListenPortClash(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	ln, err := Listen(addr)
	if err == nil {
		ln.Close()
		t.Fatalf("Listen(%s) on a busy port succeeded", addr)
	}
	want := "listen on " + addr + ": bind: address already in use"
	if err.Error() != want || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Listen(%s) = %q, want %q wrapping EADDRINUSE", addr, err, want)
	}
}

func TestServeStopsOnContextEnd(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, Endpoints{Gatherer: prometheus.NewRegistry(), Grace: 5 * time.Second, Log: discard})
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still running 5s after ctx ended")
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Serve returned", ln.Addr())
	}
}

// TestServeAnswersDuringShutdownDelay: after ctx ends, the port keeps
// accepting for ShutdownDelay, with /readyz failing, and then closes. The
// agents' pod-to-pod check dials this port on a stopping pod until its
// EndpointSlice says it is going; without the delay those dials are refused.
func TestServeAnswersDuringShutdownDelay(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	const delay = 2 * time.Second
	go func() {
		done <- Serve(ctx, ln, Endpoints{Gatherer: prometheus.NewRegistry(), Grace: time.Second, ShutdownDelay: delay, Log: discard})
	}()
	get := func(path string) (int, string, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	if code, body, err := get("/readyz"); err != nil || code != http.StatusOK {
		t.Fatalf("GET /readyz before ctx ended = %d %q, %v; want 200", code, body, err)
	}
	stopped := time.Now()
	cancel()
	// Serve sees ctx end in a moment; the port answers throughout.
	var (
		code int
		body string
	)
	for time.Since(stopped) < delay/2 {
		if code, body, err = get("/readyz"); err != nil || code == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("GET /readyz during the delay = %d %q, %v; want 503 shutting down", code, body, err)
	}
	if code, _, err := get("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz during the delay = %d, %v; want 200", code, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-time.After(delay + 5*time.Second):
		t.Fatal("Serve still running long after its delay")
	}
	if took := time.Since(stopped); took < delay {
		t.Errorf("Serve returned %s after ctx ended, before its delay of %s", took, delay)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Serve returned", addr)
	}
}

func TestServeReportsAFailedListener(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = Serve(context.Background(), ln, Endpoints{Gatherer: prometheus.NewRegistry(), Log: discard})
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("Serve on a closed listener = %v, want an error naming %s", err, ln.Addr())
	}
}

// TestListenWithoutHostTakesEveryFamily: the binaries' default addresses
// (":8080", ":8443") name no host, and such a listener answers on IPv4 and
// on IPv6, so metrics, health probes and admission work in IPv6 single-stack
// and dual-stack pods alike ("0.0.0.0:8080" would answer IPv4 only).
func TestListenWithoutHostTakesEveryFamily(t *testing.T) {
	ln, err := Listen(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, ip := range []string{"127.0.0.1", "::1"} {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), time.Second)
		if err != nil {
			t.Errorf("dial %s: %v", ip, err)
			continue
		}
		c.Close()
	}
}
