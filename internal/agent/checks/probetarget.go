package checks

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

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

// statusRange writes an accepted status range as the status option does.
func statusRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}
