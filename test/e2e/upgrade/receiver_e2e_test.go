//go:build e2e

package upgrade

import (
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup/plugins"
)

// receiver stands for a CMDB the critical hook plugin must reach before a
// node may go: it records, per node, every POST and from which pod IP, and
// refuses (500) the nodes it is told to hold.
type receiver struct {
	mu sync.Mutex
	// held are the nodes refused until released.
	held map[string]bool
	// hits are the POSTs per node, refused or accepted.
	hits map[string][]hit
}

// hit is one POST of the hook plugin.
type hit struct {
	at       time.Time
	from     string // the webhook pod's IP
	accepted bool
}

func newReceiver() *receiver {
	return &receiver{held: map[string]bool{}, hits: map[string][]hit{}}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		// The plugin's health probe: answering at all is healthy.
		w.WriteHeader(http.StatusOK)
		return
	}
	var doc plugins.HookDocument
	if err := json.NewDecoder(req.Body).Decode(&doc); err != nil || doc.Node.Name == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	from, _, _ := net.SplitHostPort(req.RemoteAddr)
	r.mu.Lock()
	defer r.mu.Unlock()
	h := hit{at: time.Now(), from: from, accepted: !r.held[doc.Node.Name]}
	r.hits[doc.Node.Name] = append(r.hits[doc.Node.Name], h)
	if !h.accepted {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// hold makes the receiver refuse node's document until release.
func (r *receiver) hold(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held[node] = true
}

func (r *receiver) release(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.held, node)
}

// hitsOf returns node's POSTs so far.
func (r *receiver) hitsOf(node string) []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits[node]...)
}

// acceptedBefore reports whether node's document was accepted before t.
func (r *receiver) acceptedBefore(node string, t time.Time) bool {
	for _, h := range r.hitsOf(node) {
		if h.accepted && !h.at.After(t) {
			return true
		}
	}
	return false
}
