package checks

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// probeUserAgent lets an endpoint's logs tell the agent's probes from other callers.
const probeUserAgent = "kube-node-ready-agent"

// probeBodyLimit is how much of a response body is read before closing.
const probeBodyLimit = 4 << 10

// ProbeTarget is one endpoint the probe check must reach, as parsed by ParseProbeTarget.
type ProbeTarget struct {
	// Scheme is "http", "https" or "tcp".
	Scheme string
	// Address is the target's host:port.
	Address string
	// URL is the request URL of an http or https target, without the options.
	URL string
	// StatusMin and StatusMax bound the accepted HTTP status codes, inclusive.
	StatusMin, StatusMax int
	// Timeout bounds this target alone; zero leaves only the check's timeout.
	Timeout time.Duration
	// Insecure skips certificate verification of an https target.
	Insecure bool
}

// String names the target in errors: its URL, or "tcp host:port".
func (t ProbeTarget) String() string {
	if t.Scheme == "tcp" {
		return "tcp " + t.Address
	}
	return t.URL
}

// ParseProbeTarget parses one probe target. The syntax is
//
//	http://host:port/path[#option&option...]
//	https://host:port/path[#option&option...]
//	tcp://host:port[#timeout=DURATION]
//
// with these options:
//
//	status=CODE or status=LOW-HIGH  accepted HTTP status (default: any 2xx);
//	                                redirects are not followed, a 3xx is compared like any code
//	timeout=DURATION                time allowed for this target, e.g. 500ms or 2s;
//	                                the check's timeout still applies when it is shorter
//	insecure=true                   https only: skip certificate verification,
//	                                for node-local endpoints with self-signed certificates
//
// The port is always required; an IPv6 host goes in brackets ([fd00::1]:9099).
// An http target passes when a GET answers with an accepted status, a tcp
// target when a TCP connection is established. Example:
//
//	http://127.0.0.1:9099/healthz#status=200&timeout=1s
func ParseProbeTarget(s string) (ProbeTarget, error) {
	t, err := parseProbeTarget(s)
	if err != nil {
		return ProbeTarget{}, fmt.Errorf("probe target %q: %w", s, err)
	}
	return t, nil
}

func parseProbeTarget(s string) (ProbeTarget, error) {
	// A '#' can only start a URL's fragment, so the first one starts the options.
	base, options, hasOptions := strings.Cut(s, "#")
	scheme, rest, ok := strings.Cut(base, "://")
	if !ok {
		return ProbeTarget{}, errors.New("want scheme://host:port, with scheme http, https or tcp")
	}
	t := ProbeTarget{Scheme: strings.ToLower(scheme)}
	switch t.Scheme {
	case "http", "https", "tcp":
	default:
		return ProbeTarget{}, fmt.Errorf("unknown scheme %q, want http, https or tcp", scheme)
	}

	// The authority is checked before url.Parse, whose message for a bad port
	// is less clear and which accepts ports 0 and above 65535.
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	if strings.Contains(authority, "@") {
		// Credentials would show in the process list and in every error message.
		return ProbeTarget{}, errors.New("user info in the address is not supported")
	}
	if authority == "" {
		return ProbeTarget{}, errors.New("missing host and port")
	}
	if !hasPort(authority) {
		return ProbeTarget{}, fmt.Errorf("missing port in %q", authority)
	}
	host, port, err := net.SplitHostPort(authority)
	if err != nil {
		return ProbeTarget{}, fmt.Errorf("bad address %q, want host:port or [ipv6]:port", authority)
	}
	if host == "" {
		return ProbeTarget{}, fmt.Errorf("missing host in %q", authority)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return ProbeTarget{}, fmt.Errorf("port %q is not a number between 1 and 65535", port)
	}

	u, err := url.Parse(base)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the value is already named by the caller
		}
		return ProbeTarget{}, fmt.Errorf("bad URL: %w", err)
	}
	// url.Parse decodes an IPv6 zone (%25eth0), so its host is the one to dial.
	t.Address = net.JoinHostPort(u.Hostname(), u.Port())
	if t.Scheme == "tcp" {
		if u.Path != "" || u.RawQuery != "" {
			return ProbeTarget{}, errors.New("a tcp target takes no path or query")
		}
	} else {
		t.URL = u.String()
		t.StatusMin, t.StatusMax = 200, 299
	}

	if hasOptions {
		if err := t.parseOptions(options); err != nil {
			return ProbeTarget{}, err
		}
	}
	return t, nil
}

func (t *ProbeTarget) parseOptions(options string) error {
	seen := map[string]bool{}
	for _, opt := range strings.Split(options, "&") {
		key, value, ok := strings.Cut(opt, "=")
		if !ok || key == "" {
			return fmt.Errorf("option %q is not key=value", opt)
		}
		if seen[key] {
			return fmt.Errorf("option %q given twice", key)
		}
		seen[key] = true
		switch key {
		case "status":
			if t.Scheme == "tcp" {
				return errors.New("option status applies to http and https targets only")
			}
			lo, hi, err := parseStatusRange(value)
			if err != nil {
				return err
			}
			t.StatusMin, t.StatusMax = lo, hi
		case "timeout":
			d, err := time.ParseDuration(value)
			if err != nil {
				return fmt.Errorf("bad timeout %q, want a duration such as 500ms or 2s", value)
			}
			if d <= 0 {
				return fmt.Errorf("timeout %q must be positive", value)
			}
			t.Timeout = d
		case "insecure":
			if t.Scheme != "https" {
				return errors.New("option insecure applies to https targets only")
			}
			b, err := strconv.ParseBool(value)
			if err != nil {
				return fmt.Errorf("bad insecure %q, want true or false", value)
			}
			t.Insecure = b
		default:
			return fmt.Errorf("unknown option %q, want status, timeout or insecure", key)
		}
	}
	return nil
}

// hasPort reports whether an authority ends in a non-empty :port, which must
// follow the closing bracket of an IPv6 host.
func hasPort(authority string) bool {
	if strings.HasPrefix(authority, "[") {
		_, after, ok := strings.Cut(authority, "]")
		return ok && len(after) > 1 && after[0] == ':'
	}
	i := strings.LastIndex(authority, ":")
	return i >= 0 && i < len(authority)-1
}

// parseStatusRange parses "200" or "200-299".
func parseStatusRange(s string) (lo, hi int, err error) {
	bad := fmt.Errorf("bad status %q, want a code such as 200 or a range such as 200-299, within 100-599", s)
	first, second, isRange := strings.Cut(s, "-")
	if lo, err = strconv.Atoi(first); err != nil {
		return 0, 0, bad
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(second); err != nil {
			return 0, 0, bad
		}
	}
	if lo < 100 || hi > 599 || lo > hi {
		return 0, 0, bad
	}
	return lo, hi, nil
}

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

func statusRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
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
