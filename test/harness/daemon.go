package harness

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// AgentBinary and WebhookBinary are the project's binaries, as `make
	// build` writes them to bin/ at the repository root.
	AgentBinary   = "kube-node-ready-agent"
	WebhookBinary = "kube-node-ready-webhook"
	// MetricsPort is where both binaries serve /metrics, /healthz and /readyz.
	MetricsPort = 8080
	// daemonStopGrace is how long a daemon gets to exit on SIGTERM when its
	// test ends; taking longer fails the test.
	daemonStopGrace = 10 * time.Second
)

// BuiltBinary is the path of one of the project's binaries (AgentBinary,
// WebhookBinary); a missing one fails tb with a pointer to `make build`.
func BuiltBinary(tb testing.TB, name string) string {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(root, "bin", name)
	if _, err := os.Stat(bin); err != nil {
		tb.Fatalf("%s missing: run `make build` first: %v", bin, err)
	}
	return bin
}

// Daemon is one of the project's binaries running as a process with its
// ports on an address of its own: an agent playing a node (StartAgent) or a
// webhook replica (StartWebhook).
type Daemon struct {
	*Process
	// IP is the address its ports listen on (MetricsPort, and the webhook's
	// WebhookPort).
	IP string
}

// startDaemon runs binary as name; it is stopped when the test
// ends, its log tail printed if the test failed.
func (cp *ControlPlane) startDaemon(tb testing.TB, name, ip, binary string, args []string) *Daemon {
	tb.Helper()
	p, err := StartProcess(cp.Dir, name, binary, args, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Stop(daemonStopGrace); err != nil {
			tb.Error(err)
		}
		if tb.Failed() {
			tb.Logf("%s log:\n%s", name, p.Tail(60))
		}
	})
	return &Daemon{Process: p, IP: ip}
}

// URL is the address of path on the daemon's metrics port.
func (d *Daemon) URL(path string) string {
	return "http://" + hostPort(d.IP, MetricsPort) + path
}

// WaitReady waits for /readyz to answer 200; the process dying fails the
// test with its log.
func (d *Daemon) WaitReady(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	hc := &http.Client{Timeout: time.Second}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if exited, _ := d.Exited(); exited {
			return false, d.ExitError()
		}
		resp, err := hc.Get(d.URL("/readyz"))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		tb.Fatalf("%s not ready: %v", d.Name, err)
	}
}

// Metric sums the daemon's samples of name whose labels contain all of
// match; a failed scrape fails the test.
func (d *Daemon) Metric(tb testing.TB, name string, match ...string) float64 {
	tb.Helper()
	v, err := d.TryMetric(name, match...)
	if err != nil {
		tb.Fatalf("scrape %s: %v", d.Name, err)
	}
	return v
}

// TryMetric is Metric for polling loops: an error instead of a failed test.
func (d *Daemon) TryMetric(name string, match ...string) (float64, error) {
	return ScrapeMetric(d.URL("/metrics"), name, match...)
}
