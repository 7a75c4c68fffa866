package plugins

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// maxRedirects bounds the redirects a read follows, as net/http does.
const maxRedirects = 10

// noRedirectsAway returns a copy of c whose redirects never leave the
// receiver the plugin was configured with, nor repeat a write:
//
//   - net/http copies every request header to the redirect target except
//     Authorization, Cookie and WWW-Authenticate, and those only when the
//     host name changes (not the port): a custom auth header (X-Api-Key) and,
//     on another port of the same host, Authorization too would follow;
//   - it sends the first URL as Referer, and for a chat webhook that URL is
//     the secret;
//   - a 307 or 308 re-sends a POST's body (the node document, the message) to
//     the target, and a 301, 302 or 303 turns a POST or DELETE into a GET
//     whose 2xx would count as delivered.
//
// So a GET or HEAD (health probes, the Portworx node list) follows redirects
// only to the same scheme, host and port; a POST or DELETE follows none. A
// redirect not followed is the answer the caller sees (a 3xx status, see
// statusText), never an error that hides it.
func noRedirectsAway(c *http.Client) *http.Client {
	if c == nil {
		c = &http.Client{}
	}
	out := *c
	out.CheckRedirect = sameOriginReads
	return &out
}

// sameOriginReads is the CheckRedirect of noRedirectsAway.
func sameOriginReads(req *http.Request, via []*http.Request) error {
	first := via[0]
	if first.Method != http.MethodGet && first.Method != http.MethodHead {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects || !sameOrigin(first.URL, req.URL) {
		return http.ErrUseLastResponse
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (an omitted port is the scheme's default).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// statusText renders an HTTP status for an error, saying so when it is a
// redirect the plugin did not follow.
func statusText(code int) string {
	if code/100 == 3 && code != http.StatusNotModified {
		return fmt.Sprintf("HTTP %d, a redirect, not followed (credentials and documents go only to the configured host; configure the URL it points to)", code)
	}
	return fmt.Sprintf("HTTP %d", code)
}
