package realnode_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
)

// This file attributes the API server's work to its clients by identity:
// the audit log for requests and watches, the clients' own TCP sockets for
// the bytes the server sent them, and a second watch with every client
// watch's selectors for the events it delivered.

// clientCalls is what one class of clients (every kubelet, every agent)
// asked of the API server over a window, as its audit log records it.
type clientCalls struct {
	// requests counts the completed requests other than watches by
	// "verb resource[/subresource]".
	requests map[string]int
	// watchesOpened counts the watches started in the window by resource.
	watchesOpened map[string]int
	// watchSeconds is the time every watch of the class was open within
	// the window, summed: divided by the window, the watches held on
	// average.
	watchSeconds float64
}

// total is every request of the window, watches counted when they start.
func (cc *clientCalls) total() int {
	n := 0
	for _, v := range cc.requests {
		n += v
	}
	for _, v := range cc.watchesOpened {
		n += v
	}
	return n
}

// watchSpan is one watch of a client class: when the server received it and
// when it ended (zero while open).
type watchSpan struct {
	class, uri string
	start, end time.Time
}

// auditByClient reads the whole audit log at path and counts, for each
// class classOf gives a request's username and URI (none: ""), its requests in [from, to) and
// the time its watches were open in it; it also returns every watch open at
// from, for watchEvents.
func auditByClient(path string, from, to time.Time, classOf func(user, uri string) string) (map[string]*clientCalls, []watchSpan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	out := map[string]*clientCalls{}
	calls := func(class string) *clientCalls {
		if out[class] == nil {
			out[class] = &clientCalls{requests: map[string]int{}, watchesOpened: map[string]int{}}
		}
		return out[class]
	}
	watches := map[string]*watchSpan{}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		var l fleet.AuditEvent
		if json.Unmarshal(line, &l) != nil {
			continue
		}
		class := classOf(l.User.Username, l.RequestURI)
		if class == "" {
			continue
		}
		in := !l.RequestReceivedTimestamp.Before(from) && l.RequestReceivedTimestamp.Before(to)
		switch {
		case l.Verb == "watch" && l.Stage == "ResponseStarted":
			uri, err := url.QueryUnescape(l.RequestURI)
			if err != nil {
				uri = l.RequestURI
			}
			watches[l.AuditID] = &watchSpan{class: class, uri: uri, start: l.RequestReceivedTimestamp}
			if in {
				calls(class).watchesOpened[l.Resource()]++
			}
		case l.Verb == "watch":
			if w := watches[l.AuditID]; w != nil {
				w.end = l.StageTimestamp
			}
		case l.Stage == "ResponseComplete" && in:
			calls(class).requests[l.Verb+" "+l.Resource()]++
		}
	}
	var open []watchSpan
	for _, w := range watches {
		start, end := w.start, w.end
		if end.IsZero() || end.After(to) {
			end = to
		}
		if start.Before(from) {
			start = from
		}
		if end.After(start) {
			calls(w.class).watchSeconds += end.Sub(start).Seconds()
		}
		if w.start.Before(from) && (w.end.IsZero() || w.end.After(from)) {
			open = append(open, *w)
		}
	}
	return out, open, nil
}

// watchEvents opens, with the benchmark's own credentials, one watch with
// the path and selectors of each of watches, from the current resource
// version rv, for d, and counts the events (bookmarks among them) and bytes
// each delivered by the class of the watch it copies: the same server, the
// same selectors and the same time deliver the same events. It returns
// when every copy has ended.
func watchEvents(ctx context.Context, cfg *rest.Config, watches []watchSpan, rv string, d time.Duration) (events, bookmarks map[string]int, bytes map[string]int64, err error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	type result struct {
		class            string
		events, bookmark int
		bytes            int64
		err              error
	}
	results := make(chan result, len(watches))
	for _, w := range watches {
		go func() {
			r := result{class: w.class}
			r.events, r.bookmark, r.bytes, r.err = copyWatch(ctx, hc, cfg.Host, w.uri, rv, d)
			results <- r
		}()
	}
	events, bookmarks, bytes = map[string]int{}, map[string]int{}, map[string]int64{}
	for range watches {
		r := <-results
		if r.err != nil && err == nil {
			err = r.err
		}
		events[r.class] += r.events
		bookmarks[r.class] += r.bookmark
		bytes[r.class] += r.bytes
	}
	return events, bookmarks, bytes, err
}

// copyWatch is one watch of watchEvents.
func copyWatch(ctx context.Context, hc *http.Client, host, uri, rv string, d time.Duration) (events, bookmarks int, n int64, err error) {
	u, err := url.Parse(uri)
	if err != nil {
		return 0, 0, 0, err
	}
	q := u.Query()
	q.Set("resourceVersion", rv)
	q.Del("resourceVersionMatch")
	q.Del("sendInitialEvents")
	// The server sends a bookmark just before a watch's timeout: the copy
	// outlives the window and is cut at its end, as the clients' watches
	// (5 to 60 minutes) mostly outlive it.
	q.Set("timeoutSeconds", strconv.Itoa(int(d.Seconds())+120))
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(host, "/")+u.Path+"?"+q.Encode(), nil)
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("watch %s: %w", uri, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return 0, 0, 0, fmt.Errorf("watch %s: %s: %s", uri, resp.Status, body)
	}
	cr := &countingReader{r: resp.Body}
	dec := json.NewDecoder(cr)
	for {
		var ev struct {
			Type string `json:"type"`
		}
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() == nil {
				return events, bookmarks, cr.n, fmt.Errorf("watch %s: ended before the window: %w", uri, err)
			}
			break
		}
		if ev.Type == "ERROR" {
			return events, bookmarks, cr.n, fmt.Errorf("watch %s: an ERROR event", uri)
		}
		if ev.Type == "BOOKMARK" {
			bookmarks++
		}
		events++
	}
	return events, bookmarks, cr.n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// socketBytes maps each TCP connection (by its local address) to the bytes
// it has received: on a client's side, what the server sent it, TLS
// records and all, as the network carried them.
type socketBytes map[string]int64

var (
	ssBytesReceived = regexp.MustCompile(`bytes_received:(\d+)`)
	ssUser          = regexp.MustCompile(`users:\(\("([^"]+)"`)
)

// readSockets runs ss (-tinpH, connections to dst) with nsenterArgs in front
// (nsenter into a namespace; none: this one) and returns the connections of
// the process named process (any: "").
func readSockets(ctx context.Context, nsenterArgs []string, dst, process string) (socketBytes, error) {
	args := append(append([]string{}, nsenterArgs...), "ss", "-tinpH", "dst", dst)
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return parseSockets(string(out), process), nil
}

// parseSockets reads ss -tinpH: a line per connection (state, queues, local
// and peer address, process), its TCP information on the next, indented.
func parseSockets(out, process string) socketBytes {
	s := socketBytes{}
	var local string
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			local = ""
			f := strings.Fields(line)
			if len(f) >= 5 && f[0] == "ESTAB" {
				if m := ssUser.FindStringSubmatch(line); process == "" || m != nil && m[1] == process {
					local = f[3]
				}
			}
			continue
		}
		if m := ssBytesReceived.FindStringSubmatch(line); m != nil && local != "" {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			s[local] = v
		}
	}
	return s
}

// received is what the connections of end received since start; a
// connection not in start counts from its opening. It also returns how many
// connections of start had closed (their last bytes are not counted).
func received(start, end socketBytes) (bytes int64, closed int) {
	for k, v := range end {
		bytes += v - start[k]
	}
	for k := range start {
		if _, ok := end[k]; !ok {
			closed++
		}
	}
	return bytes, closed
}
