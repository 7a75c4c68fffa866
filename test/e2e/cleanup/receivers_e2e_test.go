//go:build e2e

package cleanup

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// pxBehaviour is how the fake Portworx answers a DELETE for one node.
type pxBehaviour int

const (
	pxOK     pxBehaviour = iota // 200
	pxFail                      // 500
	pxHang                      // block until released or the client goes away
	pxAbsent                    // the node is not in the Portworx cluster
)

// pxCall is one DELETE /v1/cluster/{id} the fake Portworx received.
type pxCall struct {
	node   string
	status int
	// check is what the test's hook saw in the real API server when the call arrived.
	check string
}

// portworx speaks the OpenStorage cluster REST API as documented in
// docs/cleanup-plugins.md: GET /v1/cluster/enumerate, DELETE /v1/cluster/{id}.
type portworx struct {
	mu        sync.Mutex
	behaviour map[string]pxBehaviour
	calls     []pxCall
	arrived   chan string   // node of each hanging call, as it arrives
	release   chan struct{} // closing it lets hanging calls answer 200
	onDelete  func(node string) string
	token     string
	badAuth   int
	// enumerates counts GET /v1/cluster/enumerate: one per plugin run.
	enumerates int
}

// newPortworx is a Portworx stand-in that knows every node and expects the
// token "px-token".
func newPortworx() *portworx {
	return &portworx{behaviour: map[string]pxBehaviour{}, arrived: make(chan string, 16), release: make(chan struct{}), token: "px-token"}
}

// servePortworx serves a Portworx stand-in on addr and writes a cleanup
// configuration whose only plugin is a critical portworx plugin calling it
// (with timeout, unless empty), with its token file beside it in dir.
func servePortworx(t *testing.T, dir, addr, timeout string) (*portworx, string) {
	t.Helper()
	px := newPortworx()
	harness.ServeHTTP(t, addr, px)
	token := writeFile(t, dir, "px-token", px.token+"\n")
	if timeout != "" {
		timeout = "\n    timeout: " + timeout
	}
	config := writeFile(t, dir, "config.yaml", fmt.Sprintf(`plugins:
  portworx:
    critical: true%s
    endpoint: http://%s
    tokenFile: %s
`, timeout, addr, token))
	return px, config
}

func (p *portworx) set(node string, b pxBehaviour) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.behaviour[node] = b
}

func (p *portworx) callsFor(node string) []pxCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pxCall
	for _, c := range p.calls {
		if c.node == node {
			out = append(out, c)
		}
	}
	return out
}

func (p *portworx) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if r.Header.Get("Authorization") != "Bearer "+p.token {
		p.badAuth++
	}
	p.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster/enumerate":
		type node struct {
			ID                string `json:"id"`
			SchedulerNodeName string `json:"scheduler_node_name"`
		}
		var nodes []node
		p.mu.Lock()
		p.enumerates++
		for n, b := range p.behaviour {
			if b != pxAbsent {
				nodes = append(nodes, node{ID: "px-" + n, SchedulerNodeName: n})
			}
		}
		p.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"id": "px-cluster", "nodes": nodes})
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/cluster/px-"):
		n := strings.TrimPrefix(r.URL.Path, "/v1/cluster/px-")
		p.mu.Lock()
		b := p.behaviour[n]
		hook := p.onDelete
		p.mu.Unlock()
		status := http.StatusOK
		switch b {
		case pxFail:
			status = http.StatusInternalServerError
		case pxHang:
			p.arrived <- n
			select {
			case <-p.release:
			case <-r.Context().Done():
				p.record(pxCall{node: n, status: 0})
				return
			}
		}
		check := ""
		if hook != nil {
			check = hook(n)
		}
		p.mu.Lock()
		p.calls = append(p.calls, pxCall{node: n, status: status, check: check})
		if status == http.StatusOK {
			// Decommissioned: it leaves the cluster, as in real Portworx.
			p.behaviour[n] = pxAbsent
		}
		p.mu.Unlock()
		w.WriteHeader(status)
	default:
		http.NotFound(w, r)
	}
}

func (p *portworx) enumerated() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enumerates
}

func (p *portworx) record(c pxCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
}

// chat is a Slack-compatible incoming webhook.
type chat struct {
	mu     sync.Mutex
	status int
	texts  []string
}

func (c *chat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Text string `json:"text"`
	}
	err := json.NewDecoder(r.Body).Decode(&msg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || r.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if c.status != 0 && c.status != http.StatusOK {
		w.WriteHeader(c.status)
		return
	}
	c.texts = append(c.texts, msg.Text)
}

func (c *chat) setStatus(s int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = s
}

// messagesAbout returns the texts that mention node, in arrival order.
func (c *chat) messagesAbout(node string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, t := range c.texts {
		if strings.Contains(t, "Node "+node+" ") || strings.Contains(t, "Node "+node+":") {
			out = append(out, t)
		}
	}
	return out
}

// elsewhere is a receiver on another address: it accepts and records every
// request, which is what a followed redirect would hand it.
type elsewhere struct {
	mu   sync.Mutex
	reqs []string
}

func (e *elsewhere) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
	e.mu.Lock()
	e.reqs = append(e.reqs, fmt.Sprintf("%s %s X-Api-Key=%q Authorization=%q Referer=%q body=%q",
		r.Method, r.URL.Path, r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("Referer"), body))
	e.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (e *elsewhere) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reqs)
}

// redirecting answers every request with a 307 to target (same path) while
// on, and hands it to next otherwise.
type redirecting struct {
	mu     sync.Mutex
	on     bool
	target string
	next   http.Handler
}

func (h *redirecting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	on := h.on
	h.mu.Unlock()
	if on {
		http.Redirect(w, r, h.target+r.URL.Path, http.StatusTemporaryRedirect)
		return
	}
	h.next.ServeHTTP(w, r)
}

func (h *redirecting) set(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on = on
}
