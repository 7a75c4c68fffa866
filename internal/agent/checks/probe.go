package checks

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// probeUserAgent lets an endpoint's logs tell the agent's probes from other callers.
const probeUserAgent = "kube-node-ready-agent"

// probeBodyLimit is how much of a response body is read before closing.
const probeBodyLimit = 4 << 10

// Probe gates the node on other components' health: an HTTP GET or a TCP
// connect to each configured target, for example a CNI or storage agent's
// node-local health endpoint. It passes when every target passes.
type Probe struct {
	targets []ProbeTarget
	client  *http.Client
	// insecureClient serves the targets with insecure=true: TLS settings live
	// on the transport, so those need a client of their own.
	insecureClient *http.Client
}

// NewProbe returns a probe check of targets, with its HTTP clients built once for every round.
func NewProbe(targets []ProbeTarget) *Probe {
	p := &Probe{targets: append([]ProbeTarget(nil), targets...), client: newProbeClient(false)}
	for _, t := range targets {
		if t.Insecure {
			p.insecureClient = newProbeClient(true)
			break
		}
	}
	return p
}

func newProbeClient(insecure bool) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			// Proxy is left nil: node-local endpoints must not be sent to a
			// proxy configured in the agent's environment.
			DialContext: (&net.Dialer{}).DialContext,
			// Rounds are minutes apart; an idle connection would only hold a socket open.
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 64 << 10,
			TLSClientConfig:        &tls.Config{InsecureSkipVerify: insecure, MinVersion: tls.VersionTLS12},
		},
		// A redirect is the endpoint's answer, compared with the expected status;
		// following it would test some other endpoint.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Name implements Check.
func (*Probe) Name() string { return "probe" }

// Run implements Check.
func (p *Probe) Run(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		// Give up a little before the runner does, so that a target that hangs
		// is reported by name rather than by the runner's "no answer within".
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-min(time.Until(dl)/10, 100*time.Millisecond)))
		defer cancel()
	}
	// Indexed by target so that failures are reported in the configured order.
	errs := make([]error, len(p.targets))
	var wg sync.WaitGroup
	for i, t := range p.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.probe(ctx, t)
		}()
	}
	wg.Wait()
	var failed []string
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("probe: %s", strings.Join(failed, "; "))
	}
	return nil
}

func (p *Probe) probe(ctx context.Context, t ProbeTarget) error {
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}
	var budget time.Duration
	if dl, ok := ctx.Deadline(); ok {
		budget = time.Until(dl)
	}

	var err error
	switch t.Scheme {
	case "tcp":
		err = probeTCP(ctx, t.Address)
	case "http", "https":
		client := p.client
		if t.Insecure {
			client = p.insecureClient
		}
		var status int
		status, err = probeHTTP(ctx, client, t.URL)
		if err == nil && (status < t.StatusMin || status > t.StatusMax) {
			return fmt.Errorf("%s: status %d, want %s", t, status, statusRange(t.StatusMin, t.StatusMax))
		}
	default:
		return fmt.Errorf("%s: unsupported scheme %q", t, t.Scheme)
	}
	if err == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && budget > 0 {
		// Whatever the transport says, the cause is that time ran out.
		return fmt.Errorf("%s: no answer within %s: %w", t, budget.Round(time.Millisecond), ctx.Err())
	}
	return fmt.Errorf("%s: %w", t, err)
}

func probeTCP(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return dialCause(err)
	}
	return conn.Close()
}

// probeHTTP returns the status of a GET of target, or why there was none.
func probeHTTP(ctx context.Context, client *http.Client, target string) (int, error) {
	if client == nil {
		return 0, errors.New("no HTTP client (use NewProbe)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", probeUserAgent)
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the method and URL, which name the target already
		}
		return 0, dialCause(err)
	}
	defer resp.Body.Close()
	// The body is not part of the verdict, but reading a little of it lets the
	// server finish writing instead of seeing its connection reset mid-answer.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, probeBodyLimit))
	return resp.StatusCode, nil
}

// dialCause shortens "dial tcp 10.0.0.1:5000: connect: connection refused" to
// "dial: connection refused": the target name already says the rest.
func dialCause(err error) error {
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		return err
	}
	cause := oe.Err
	var se *os.SyscallError
	if errors.As(cause, &se) {
		cause = se.Err
	}
	return fmt.Errorf("dial: %w", cause)
}

// ProbeConfig configures the probe check.
type ProbeConfig struct {
	// Targets are the endpoints, in the syntax of ParseProbeTarget.
	Targets flagenv.StringList
}

// AddFlags implements Config.
func (c *ProbeConfig) AddFlags(fs *flag.FlagSet) {
	fs.Var(&c.Targets, "check.probe.targets", "comma-separated endpoints the probe check must reach (enable it with --checks=...,probe): "+
		"http[s]://host:port/path[#status=200-299&timeout=1s&insecure=true] or tcp://host:port[#timeout=1s]")
}

// Validate implements Config: bad targets, an enabled check without
// targets, and targets for a check that is not enabled are all refused.
func (c *ProbeConfig) Validate(enabled bool) []error {
	var errs []error
	for _, t := range c.Targets {
		if _, err := ParseProbeTarget(t); err != nil {
			errs = append(errs, fmt.Errorf("--check.probe.targets: %v", err))
		}
	}
	switch {
	case enabled && len(c.Targets) == 0:
		errs = append(errs, errors.New("--check.probe.targets: the probe check is enabled but has no target"))
	case !enabled && len(c.Targets) > 0:
		errs = append(errs, errors.New("--check.probe.targets: targets given but the probe check is not enabled (add probe to --checks)"))
	}
	return errs
}

// Build implements Config.
func (c *ProbeConfig) Build(Deps) Check {
	var targets []ProbeTarget
	for _, s := range c.Targets {
		t, _ := ParseProbeTarget(s) // Validate has refused bad ones
		targets = append(targets, t)
	}
	return NewProbe(targets)
}
