package fleet

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// nodeNameExtra is where the API server records the node of the pod a
// ServiceAccount token is bound to.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// AuditEvent is what the benchmarks read of an audit log line (the
// API server's audit.k8s.io/v1 Event, one JSON object a line).
type AuditEvent struct {
	AuditID                  string    `json:"auditID"`
	Stage                    string    `json:"stage"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	Verb                     string    `json:"verb"`
	RequestURI               string    `json:"requestURI"`
	User                     struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// Resource is the event's resource with its subresource
// ("nodes/status"); the request URI for a request without one (/readyz).
func (ev *AuditEvent) Resource() string {
	if ev.ObjectRef == nil {
		return ev.RequestURI
	}
	if ev.ObjectRef.Subresource != "" {
		return ev.ObjectRef.Resource + "/" + ev.ObjectRef.Subresource
	}
	return ev.ObjectRef.Resource
}

// Request is one kind of request an agent made: verb, resource (with its
// subresource), and whether it could be served from the API server's watch
// cache ("rv0": a get or list with resourceVersion=0).
type Request struct {
	Verb, Resource string
	// Cached is true for a get or list with resourceVersion=0.
	Cached bool
	// Refused is the response's HTTP status when it is an error (403 when
	// RBAC denied the request); 0 for a success.
	Refused int
}

func (r Request) String() string {
	s := r.Verb + " " + r.Resource
	if r.Cached {
		s += " (rv=0)"
	}
	if r.Refused != 0 {
		s += fmt.Sprintf(" (%d)", r.Refused)
	}
	return s
}

// Requests reads the audit log at path from offset and counts, for each node
// whose agent authenticated with a token bound to a pod on it (simulated or
// a process: they look the same to the server), its completed requests by
// kind. It returns the offset reached, for the next window.
func Requests(path string, offset int64) (map[string]map[Request]int, int64, error) {
	return requestsWhere(path, offset, nil)
}

// Window bounds the requests of one node that count: those the API server
// received after From, up to To.
type Window struct{ From, To time.Time }

// RequestsWithin is Requests for the requests each node's agent made within
// its window (by when the API server received them); nodes without a window
// are left out.
func RequestsWithin(path string, offset int64, windows map[string]Window) (map[string]map[Request]int, error) {
	out, _, err := requestsWhere(path, offset, func(node string, ev *AuditEvent) bool {
		w, ok := windows[node]
		at := ev.RequestReceivedTimestamp
		return ok && at.After(w.From) && !at.After(w.To)
	})
	return out, err
}

// requestsWhere is Requests for the requests keep accepts (all when nil).
func requestsWhere(path string, offset int64, keep func(node string, ev *AuditEvent) bool) (map[string]map[Request]int, int64, error) {
	out := map[string]map[Request]int{}
	end, err := scanAgents(path, offset, func(node string, ev *AuditEvent) {
		if keep != nil && !keep(node, ev) {
			return
		}
		if out[node] == nil {
			out[node] = map[Request]int{}
		}
		out[node][requestOf(ev)]++
	})
	return out, end, err
}

// RequestsIn reads the audit log at path from offset and counts the agents'
// completed requests (as Requests attributes them) by kind, in each of the
// periods between consecutive bounds (by when the API server received them):
// len(bounds)-1 maps.
func RequestsIn(path string, offset int64, bounds ...time.Time) ([]map[Request]int, error) {
	out := make([]map[Request]int, max(len(bounds)-1, 0))
	for i := range out {
		out[i] = map[Request]int{}
	}
	_, err := scanAgents(path, offset, func(_ string, ev *AuditEvent) {
		t := ev.RequestReceivedTimestamp
		for i := range out {
			if !t.Before(bounds[i]) && t.Before(bounds[i+1]) {
				out[i][requestOf(ev)]++
				return
			}
		}
	})
	return out, err
}

// requestOf is the kind of request ev is.
func requestOf(ev *AuditEvent) Request {
	req := Request{Verb: ev.Verb, Resource: ev.Resource()}
	if uri, err := url.QueryUnescape(ev.RequestURI); err == nil && (ev.Verb == "get" || ev.Verb == "list") {
		req.Cached = strings.Contains(uri, "resourceVersion=0")
	}
	if ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 400 {
		req.Refused = ev.ResponseStatus.Code
	}
	return req
}

// PerSecond reads the audit log at path from offset and counts the agents'
// completed requests (as Requests attributes them) by the second the API
// server received them, as Unix seconds.
func PerSecond(path string, offset int64) (map[int64]int, int64, error) {
	out := map[int64]int{}
	end, err := scanAgents(path, offset, func(_ string, ev *AuditEvent) {
		out[ev.RequestReceivedTimestamp.Unix()]++
	})
	return out, end, err
}

// Watches reads the audit log at path from offset and lists, for each node
// (as Requests attributes requests), the watches its agent opened, by their
// request URI with the query unescaped: what each selects. A watch is
// recorded when it starts, not only when it ends, as Requests counts it.
func Watches(path string, offset int64) (map[string][]string, int64, error) {
	out := map[string][]string{}
	end, err := scanStage(path, offset, "ResponseStarted", func(node string, ev *AuditEvent) {
		if ev.Verb != "watch" {
			return
		}
		uri, err := url.QueryUnescape(ev.RequestURI)
		if err != nil {
			uri = ev.RequestURI
		}
		out[node] = append(out[node], uri)
	})
	return out, end, err
}

// Join is what one agent asked of the API server over a window.
type Join struct {
	// Requests are its requests by kind.
	Requests map[Request]int
	// ServerTime is the time the API server spent on them, received to
	// completed (watches left out: they last).
	ServerTime time.Duration
}

// RequestsUntil reads the audit log at path from offset and counts, for
// each node (as Requests attributes requests), the requests its agent made
// that the API server received before until, by kind, each once: a watch
// when it started (it completes only when it ends), any other when it
// completed. A join's requests are those before its untaint.
func RequestsUntil(path string, offset int64, until time.Time) (map[string]*Join, error) {
	out := map[string]*Join{}
	_, err := scanStage(path, offset, "", func(node string, ev *AuditEvent) {
		watch := ev.Verb == "watch"
		if !ev.RequestReceivedTimestamp.Before(until) || watch != (ev.Stage == "ResponseStarted") || !watch && ev.Stage != "ResponseComplete" {
			return
		}
		j := out[node]
		if j == nil {
			j = &Join{Requests: map[Request]int{}}
			out[node] = j
		}
		j.Requests[requestOf(ev)]++
		if !watch {
			j.ServerTime += ev.StageTimestamp.Sub(ev.RequestReceivedTimestamp)
		}
	})
	return out, err
}

// scanAgents calls fn for every completed request in the audit log at path
// from offset made with a token bound to a pod on a node, with that node. It
// returns the offset of the first line not read whole.
func scanAgents(path string, offset int64, fn func(node string, ev *AuditEvent)) (int64, error) {
	return scanStage(path, offset, "ResponseComplete", fn)
}

// scanStage is scanAgents for the audit events of stage (of every stage
// when empty).
func scanStage(path string, offset int64, stage string, fn func(node string, ev *AuditEvent)) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			// A partial last line is read again next time.
			return offset, nil
		}
		if err != nil {
			return offset, fmt.Errorf("read %s: %w", path, err)
		}
		offset += int64(len(line))
		var ev AuditEvent
		// Most lines (leases, status) carry no node-bound token: skip them unparsed.
		if !bytes.Contains(line, []byte(nodeNameExtra)) || json.Unmarshal(line, &ev) != nil || stage != "" && ev.Stage != stage {
			continue
		}
		if nodes := ev.User.Extra[nodeNameExtra]; len(nodes) == 1 {
			fn(nodes[0], &ev)
		}
	}
}

// AuditOffset is the audit log's size now: where the next window starts.
func AuditOffset(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
