package plugins

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// The plugins reach receivers at IPv6 addresses: the URLs the user writes
// carry the brackets ([::1]:port), with or without a zone (%25 in a URL),
// and nothing the plugins build from them drops them.

// zoned writes base (http://[::1]:port) with the loopback zone, as a
// link-local receiver's URL would carry its interface.
func zoned(base string) string {
	return strings.Replace(base, "[::1]", "[::1%25lo]", 1)
}

func TestHookReachesIPv6(t *testing.T) {
	r := &receiver{statuses: []int{200, 400}}
	mux := http.NewServeMux()
	mux.Handle("POST /nodes", r)
	mux.HandleFunc("GET /healthz", func(http.ResponseWriter, *http.Request) {})
	base := serveOn(t, "::1", mux)
	for i, url := range []string{base, zoned(base)} {
		p, err := build(t, newHook, `{"url":"`+url+`/nodes?token=s3cret","healthURL":"`+url+`/healthz","retries":0}`)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if err := healthOf(p); err != nil {
			t.Errorf("health of %s: %v", url, err)
		}
		err = p.Cleanup(cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: 1}), deletedNode())
		if i == 0 && err != nil {
			t.Errorf("cleanup via %s: %v", url, err)
		}
		// The second post is refused: the error names the receiver, brackets and all.
		if i == 1 && (err == nil || !strings.Contains(err.Error(), "HTTP 400") || !strings.Contains(err.Error(), "http://[::1%lo]:") || strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("cleanup via %s = %v, want an HTTP 400 naming http://[::1%%lo]:port/nodes without the query", url, err)
		}
	}
	if len(r.bodies) != 2 || r.bodies[0].Node.Name != "n1" {
		t.Errorf("receiver got %d documents, want 2 for n1", len(r.bodies))
	}
}

func TestNotifyReachesIPv6(t *testing.T) {
	var mu sync.Mutex
	var texts []string
	base := serveOn(t, "::1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		text, _ := m["text"].(string)
		mu.Lock()
		texts = append(texts, text)
		mu.Unlock()
	}))
	for _, url := range []string{base, zoned(base)} {
		p, err := build(t, newNotify, `{"urlFile":"`+secretFile(t, url+"/services/T0/B0/SECRET")+`","format":"slack","cluster":"prod"}`)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if err := p.Cleanup(cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: 1}), node("n1")); err != nil {
			t.Errorf("notify via %s: %v", url, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(texts) != 2 || !strings.Contains(texts[0], "n1") {
		t.Errorf("messages %q, want two start messages for n1", texts)
	}
}

func TestPortworxReachesIPv6(t *testing.T) {
	srv := &pxServer{enumerate: `{"nodes":[{"id":"px-1","scheduler_node_name":"n1"}]}`, deleteCode: 200}
	base := serveOn(t, "::1", srv)
	for _, endpoint := range []string{base, base + "/", zoned(base)} {
		p, err := build(t, newPortworx, `{"endpoint":"`+endpoint+`"}`)
		if err != nil {
			t.Fatalf("%s: %v", endpoint, err)
		}
		if err := p.Cleanup(context.Background(), node("n1")); err != nil {
			t.Errorf("decommission via %s: %v", endpoint, err)
		}
	}
	if got := strings.Join(srv.deleted, ","); got != "px-1?forceRemove=false,px-1?forceRemove=false,px-1?forceRemove=false" {
		t.Errorf("deleted %q, want px-1 once per endpoint", got)
	}
}
