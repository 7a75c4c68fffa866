package plugins

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// recorder is a receiver on another host: it keeps every request it gets.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path string
	header       http.Header
	body         string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.Header.Clone(), string(body)})
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (r *recorder) got() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// serveOn starts h on addr (an IP and port 0) and returns its base URL.
func serveOn(t *testing.T, ip string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Listener.Close()
	ts.Listener = l
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

// redirector answers every request with code, pointing at target plus the path.
func redirector(code int, target string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+"/landing", code)
	})
}

// What the plugins guard against is what net/http does by itself: it
// follows a 307 to another host with the body and a custom auth header such
// as X-Api-Key (it drops only Authorization, Cookie and WWW-Authenticate,
// and only when the host name differs), and tells the new host where it came
// from in Referer, which for a chat webhook is its secret URL.
func TestNetHTTPAloneForwardsCustomAuthHeaders(t *testing.T) {
	away := &recorder{}
	awayURL := serveOn(t, "127.0.0.2", away)
	origin := serveOn(t, "127.0.0.1", redirector(http.StatusTemporaryRedirect, awayURL))
	req, _ := http.NewRequest(http.MethodPost, origin+"/services/T0/B0/SECRET", strings.NewReader(`{"doc":1}`))
	req.Header.Set("X-Api-Key", "k-123")
	req.Header.Set("Authorization", "Bearer t-123")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := away.got()
	if len(got) != 1 || got[0].body != `{"doc":1}` || got[0].header.Get("X-Api-Key") != "k-123" ||
		got[0].header.Get("Authorization") != "" || !strings.Contains(got[0].header.Get("Referer"), "SECRET") {
		t.Fatalf("net/http's own redirect behaviour changed: %+v", got)
	}
}

// No plugin request, nor health probe, ever reaches another host through a
// redirect: not the auth header (Authorization or a custom one), not the
// document or message, not the secret URL as Referer. The redirect is the
// answer, and a POST or DELETE answered by a redirect was not delivered.
func TestPluginsDoNotFollowRedirectsAway(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			away := &recorder{}
			awayURL := serveOn(t, "127.0.0.2", away)
			origin := serveOn(t, "127.0.0.1", redirector(code, awayURL))
			key := secretFile(t, "k-123")
			bearer := secretFile(t, "Bearer t-123")
			chatURL := secretFile(t, origin+"/services/T0/B0/SECRET")
			steps := []struct {
				name    string
				new     func(cleanup.Deps, []byte) (cleanup.Plugin, error)
				cfg     string
				run     func(p cleanup.Plugin) error
				wantErr bool
			}{
				{"hook POST with X-Api-Key", rawNew(newHook), `{"url":"` + origin + `/nodes?token=s3cret","authHeader":"X-Api-Key","authHeaderFile":"` + key + `","retries":0}`, cleanupOf, true},
				{"hook POST with Authorization", rawNew(newHook), `{"url":"` + origin + `/nodes","authHeaderFile":"` + bearer + `","retries":0}`, cleanupOf, true},
				{"hook health probe of healthURL", rawNew(newHook), `{"url":"` + origin + `/nodes","authHeader":"X-Api-Key","authHeaderFile":"` + key + `","healthURL":"` + origin + `/healthz"}`, healthOf, true},
				{"hook reachability probe", rawNew(newHook), `{"url":"` + origin + `/nodes","authHeader":"X-Api-Key","authHeaderFile":"` + key + `"}`, healthOf, false},
				{"notify start message", rawNew(newNotify), `{"urlFile":"` + chatURL + `","retries":0}`, cleanupOf, true},
				{"notify reachability probe", rawNew(newNotify), `{"urlFile":"` + chatURL + `"}`, healthOf, false},
				{"portworx cleanup", rawNew(newPortworx), `{"endpoint":"` + origin + `","tokenFile":"` + key + `"}`, cleanupOf, true},
				{"portworx health probe", rawNew(newPortworx), `{"endpoint":"` + origin + `","tokenFile":"` + key + `"}`, healthOf, true},
			}
			for _, s := range steps {
				p, err := s.new(testDeps(&http.Client{}), []byte(s.cfg))
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				err = s.run(p)
				if s.wantErr && err == nil {
					t.Errorf("%s: redirected, yet no error", s.name)
				}
				if !s.wantErr && err != nil {
					t.Errorf("%s: %v, want reachable (a redirect is an answer)", s.name, err)
				}
				if s.wantErr && err != nil && strings.Contains(err.Error(), "SECRET") {
					t.Errorf("%s: error shows the secret URL: %v", s.name, err)
				}
			}
			if got := away.got(); len(got) > 0 {
				for _, r := range got {
					t.Errorf("the other host got %s %s with X-Api-Key=%q Authorization=%q Referer=%q body=%q",
						r.method, r.path, r.header.Get("X-Api-Key"), r.header.Get("Authorization"), r.header.Get("Referer"), r.body)
				}
			}
		})
	}
}

// A health probe may still follow a redirect on its own host (a health
// endpoint that adds a trailing slash), with its auth header.
func TestHealthProbeFollowsRedirectsOnItsHost(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	origin := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		if r.URL.Path == "/healthz" {
			http.Redirect(w, r, "/healthz/", http.StatusMovedPermanently)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	key := secretFile(t, "k-123")
	p, err := newHook(testDeps(&http.Client{}), []byte(`{"url":"`+origin+`/nodes","authHeader":"X-Api-Key","authHeaderFile":"`+key+`","healthURL":"`+origin+`/healthz"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.(cleanup.HealthChecker).Health(context.Background()); err != nil {
		t.Fatalf("Health = %v, want healthy after a redirect on the same host", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[1] != "k-123" {
		t.Errorf("X-Api-Key on the two requests = %q, want it on both", keys)
	}
}

func cleanupOf(p cleanup.Plugin) error { return p.Cleanup(context.Background(), node("n1")) }
func healthOf(p cleanup.Plugin) error  { return p.(cleanup.HealthChecker).Health(context.Background()) }
