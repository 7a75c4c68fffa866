package plugins

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// status answers every request with code and counts them.
type status struct {
	code int
	hits int
	auth string
}

func (s *status) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits++
	s.auth = r.Header.Get("X-Api-Key")
	w.WriteHeader(s.code)
}

// A closed port: nothing answers.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestHealthProbes(t *testing.T) {
	tests := []struct {
		name     string
		code     int
		dead     bool
		settings func(url string) string
		newFn    func(cleanup.Deps, []byte) (cleanup.Plugin, error)
		wantErr  string
	}{
		{name: "portworx API answers", code: 200, newFn: rawNew(newPortworx),
			settings: func(u string) string { return `{"endpoint":"` + u + `"}` }},
		{name: "portworx API refuses", code: 503, newFn: rawNew(newPortworx), wantErr: "HTTP 503",
			settings: func(u string) string { return `{"endpoint":"` + u + `"}` }},
		{name: "portworx API down", dead: true, newFn: rawNew(newPortworx), wantErr: "connect",
			settings: func(u string) string { return `{"endpoint":"` + u + `"}` }},
		{name: "hook URL answering anything is reachable", code: 405, newFn: rawNew(newHook),
			settings: func(u string) string { return `{"url":"` + u + `/x"}` }},
		{name: "hook URL down", dead: true, newFn: rawNew(newHook), wantErr: "unreachable",
			settings: func(u string) string { return `{"url":"` + u + `/x?token=s3cret"}` }},
		{name: "hook healthURL must answer 2xx", code: 500, newFn: rawNew(newHook), wantErr: "answered HTTP 500",
			settings: func(u string) string { return `{"url":"` + u + `/x","healthURL":"` + u + `/healthz"}` }},
		{name: "notify healthURL 2xx", code: 204, newFn: rawNew(newNotify),
			settings: func(u string) string { return `{"urlFile":"URLFILE","healthURL":"` + u + `/healthz"}` }},
		{name: "notify webhook down", dead: true, newFn: rawNew(newNotify), wantErr: "unreachable",
			settings: func(u string) string { return `{"urlFile":"URLFILE"}` }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &status{code: tt.code}
			url := deadURL(t)
			if !tt.dead {
				ts := httptest.NewServer(srv)
				defer ts.Close()
				url = ts.URL
			}
			settings := strings.ReplaceAll(tt.settings(url), "URLFILE", secretFile(t, url+"/hook?token=s3cret"))
			p, err := tt.newFn(testDeps(&http.Client{}), []byte(settings))
			if err != nil {
				t.Fatal(err)
			}
			hc, ok := p.(cleanup.HealthChecker)
			if !ok {
				t.Fatalf("%s offers no health probe", p.Name())
			}
			err = hc.Health(context.Background())
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Health() = %v, want %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the probe's error shows the secret URL: %v", err)
			}
			if !tt.dead && srv.hits != 1 {
				t.Errorf("%d requests, want one GET", srv.hits)
			}
		})
	}
}

func TestHookHealthSendsTheAuthHeader(t *testing.T) {
	srv := &status{code: 200}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	p, err := newHook(testDeps(&http.Client{}),
		[]byte(`{"url":"`+ts.URL+`/x","authHeader":"X-Api-Key","authHeaderFile":"`+secretFile(t, "k-1")+`","healthURL":"`+ts.URL+`/healthz"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.(cleanup.HealthChecker).Health(context.Background()); err != nil || srv.auth != "k-1" {
		t.Errorf("Health() = %v, auth header %q, want nil and k-1", err, srv.auth)
	}
}

func TestHealthURLMustParse(t *testing.T) {
	for _, tc := range []struct {
		newFn    func(cleanup.Deps, []byte) (cleanup.Plugin, error)
		settings string
		want     string
	}{
		{rawNew(newHook), `{"url":"http://h/x","healthURL":"ftp://h"}`, "hook.healthURL"},
		{rawNew(newNotify), `{"urlFile":"URLFILE","healthURL":"::"}`, "notify.healthURL"},
	} {
		settings := strings.ReplaceAll(tc.settings, "URLFILE", secretFile(t, "http://h/hook"))
		if _, err := tc.newFn(testDeps(&http.Client{}), []byte(settings)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", settings, err, tc.want)
		}
	}
}

func rawNew(f func(cleanup.Deps, json.RawMessage) (cleanup.Plugin, error)) func(cleanup.Deps, []byte) (cleanup.Plugin, error) {
	return func(d cleanup.Deps, b []byte) (cleanup.Plugin, error) { return f(d, b) }
}

// The auth header never goes to a healthURL on another host.
func TestHookHealthKeepsTheAuthHeaderOnItsHost(t *testing.T) {
	other := &status{code: 200}
	ts := httptest.NewServer(other)
	defer ts.Close()
	p, err := newHook(testDeps(&http.Client{}),
		[]byte(`{"url":"http://cmdb.invalid/x","authHeader":"X-Api-Key","authHeaderFile":"`+secretFile(t, "k-1")+`","healthURL":"`+ts.URL+`/healthz"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.(cleanup.HealthChecker).Health(context.Background()); err != nil || other.auth != "" {
		t.Errorf("Health() = %v, auth header %q sent to another host, want none", err, other.auth)
	}
}
