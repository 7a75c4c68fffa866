package plugins

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// defaultRetries is how often the POSTing plugins retry one request.
const defaultRetries = 3

// parseRetries reads a plugin's `retries` setting: 0 to 10, default 3.
func parseRetries(plugin string, v *int) (uint64, error) {
	r := defaultRetries
	if v != nil {
		r = *v
	}
	if r < 0 || r > 10 {
		return 0, fmt.Errorf("%s.retries: want 0 to 10, got %d", plugin, r)
	}
	return uint64(r), nil
}

// jsonPost is one JSON document to POST, as the notify and hook plugins send them.
type jsonPost struct {
	// url is the target; it may be a secret, so errors use name instead.
	url, name string
	// header holds extra request headers.
	header http.Header
	// retries after the first POST, with exponential backoff.
	retries uint64
	// accepted says whether a status code means delivered; nil is any 2xx.
	accepted func(code int) bool
}

// postJSON sends body to p.url until it is accepted: connection errors and
// other answers are retried with backoff within ctx, except a 4xx other than
// 408 and 429, which will not change, and a redirect, which client must not
// follow (see noRedirectsAway). Errors never contain the URL.
func postJSON(ctx context.Context, client *http.Client, p jsonPost, body []byte) error {
	accepted := p.accepted
	if accepted == nil {
		accepted = func(code int) bool { return code/100 == 2 }
	}
	b := backoff.WithContext(backoff.WithMaxRetries(&backoff.ExponentialBackOff{
		InitialInterval: 500 * time.Millisecond, RandomizationFactor: 0.2, Multiplier: 2,
		MaxInterval: 5 * time.Second, Clock: backoff.SystemClock,
	}, p.retries), ctx)
	return backoff.Retry(func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
		if err != nil {
			// url.Parse errors quote the whole URL.
			return backoff.Permanent(fmt.Errorf("bad URL for %s: %v", p.name, redactURL(err)))
		}
		for k, v := range p.header {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "kube-node-ready-webhook")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("POST to %s failed: %v", p.name, redactURL(err))
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		switch {
		case accepted(resp.StatusCode):
			return nil
		case resp.StatusCode/100 == 3:
			// Not followed (noRedirectsAway): the document stays with the configured host.
			return backoff.Permanent(fmt.Errorf("%s did not take it: %s", p.name, statusText(resp.StatusCode)))
		case resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusRequestTimeout:
			return backoff.Permanent(fmt.Errorf("%s refused it: HTTP %d", p.name, resp.StatusCode))
		}
		return fmt.Errorf("%s: HTTP %d", p.name, resp.StatusCode)
	}, b)
}

// probeHTTP is the health probe of a receiver: a GET of target. With strict
// (a health URL the operator named) only a 2xx answer is healthy; otherwise
// any HTTP answer shows the receiver reachable (a webhook URL need not answer
// GET well), and only a failure to get one (DNS, connection, TLS) is not.
// Errors never contain the URL.
func probeHTTP(ctx context.Context, client *http.Client, target, name string, header http.Header, strict bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("bad URL for %s: %v", name, redactURL(err))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "kube-node-ready-webhook")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s unreachable: %v", name, redactURL(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if strict && resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", name, statusText(resp.StatusCode))
	}
	return nil
}

// checkHealthURL validates a plugin's optional healthURL setting.
func checkHealthURL(plugin, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s.healthURL: %q is not an http(s) URL with a host", plugin, redactedURL(raw))
	}
	return nil
}
