package fleet

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Traffic counts what one simulated agent's client sends and receives:
// requests, and the bytes of the responses' bodies as the client reads
// them (watch streams included, as they arrive).
type Traffic struct {
	requests atomic.Int64
	bytes    atomic.Int64
	// untaint is bytes as the agent logged its untaint, once untainted.
	untaint   atomic.Int64
	untainted atomic.Bool

	mu sync.Mutex
	// byKind are the response bytes by request kind (Kind).
	byKind map[string]int64
}

// Requests is the requests sent so far.
func (t *Traffic) Requests() int64 { return t.requests.Load() }

// Bytes is the response bytes read so far.
func (t *Traffic) Bytes() int64 { return t.bytes.Load() }

// BytesAtUntaint is Bytes as the agent logged its untaint (UntaintMsg),
// noted by its log writer as the line went by: what its join read, without
// the watch events that arrived before a poll saw the line (a Node's copy,
// about 3.7 KiB each); false before the line.
func (t *Traffic) BytesAtUntaint() (int64, bool) {
	if !t.untainted.Load() {
		return 0, false
	}
	return t.untaint.Load(), true
}

// untaintMarker passes an agent's log lines on to w, noting its traffic's
// bytes as the untaint's line goes by (BytesAtUntaint). The agent writes
// that line right after its untaint's patch returned.
type untaintMarker struct {
	w io.Writer
	t *Traffic
}

func (m untaintMarker) Write(p []byte) (int, error) {
	if !m.t.untainted.Load() && bytes.Contains(p, []byte(UntaintMsg)) {
		m.t.untaint.Store(m.t.Bytes())
		m.t.untainted.Store(true)
	}
	return m.w.Write(p)
}

// BytesOf is the response bytes read so far of requests of kind (Kind).
func (t *Traffic) BytesOf(kind string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byKind[kind]
}

// Kind names a request by method and path, with "?watch" for a watch and
// "?fieldSelector" for a field-selected read: "GET
// /apis/discovery.k8s.io/v1/namespaces/x/endpointslices" is a list of a
// namespace's slices.
func Kind(r *http.Request) string {
	k := r.Method + " " + r.URL.Path
	q := r.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		k += "?watch"
	}
	if q.Get("fieldSelector") != "" {
		k += "?fieldSelector"
	}
	return k
}

// Kinds are the kinds of requests (Kind) whose responses were read.
func (t *Traffic) Kinds() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.byKind))
}

// CountInto returns a rest.Config WrapTransport that counts into t.
func CountInto(t *Traffic) func(http.RoundTripper) http.RoundTripper { return t.wrap }

// wrap is a rest.Config WrapTransport that counts into t.
func (t *Traffic) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.requests.Add(1)
		resp, err := rt.RoundTrip(r)
		if err == nil && resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, t: t, kind: Kind(r)}
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingBody counts what is read of a response body.
type countingBody struct {
	io.ReadCloser
	t    *Traffic
	kind string
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.bytes.Add(int64(n))
		b.t.mu.Lock()
		if b.t.byKind == nil {
			b.t.byKind = map[string]int64{}
		}
		b.t.byKind[b.kind] += int64(n)
		b.t.mu.Unlock()
	}
	return n, err
}

// IsSliceList says whether kind is a list of EndpointSlices that names
// none (a choice of peer slices, or the Service's slices listed whole).
func IsSliceList(kind string) bool {
	return strings.HasPrefix(kind, "GET ") && strings.HasSuffix(kind, "/endpointslices")
}

// UntaintMsg is the agent's log message when its write removed the startup
// taint (internal/agent/write.go).
const UntaintMsg = "node verified; startup taint removed"

// UntaintLog is a fleet's log output (Options.Log) that notes when an agent
// logged its untaint (UntaintMsg), by the line's own time: the end of its
// join.
type UntaintLog struct {
	mu   sync.Mutex
	when map[string]time.Time
}

func (l *UntaintLog) Write(p []byte) (int, error) {
	for line := range bytes.SplitSeq(p, []byte("\n")) {
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
			Node string    `json:"node"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == UntaintMsg {
			l.mu.Lock()
			if l.when == nil {
				l.when = map[string]time.Time{}
			}
			l.when[rec.Node] = rec.Time
			l.mu.Unlock()
		}
	}
	return len(p), nil
}

// At is when node's agent logged its untaint; zero before.
func (l *UntaintLog) At(node string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.when[node]
}
