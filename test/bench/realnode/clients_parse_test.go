package realnode_test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ssOutput is ss -tinpH as it prints connections to the API server: the
// kubelet's, the agent's (one carries no data yet), one closing, and one of
// a process that is neither.
const ssOutput = `ESTAB 0      0      10.0.0.2:41000 10.0.0.1:6443 users:(("kubelet",pid=101,fd=12))
	 cubic wscale:7,7 rto:204 rtt:0.31/0.12 mss:1448 cwnd:10 bytes_sent:9100 bytes_acked:9101 bytes_received:52000 segs_out:80 segs_in:75
ESTAB 0      0      10.0.0.2:41002 10.0.0.1:6443 users:(("kube-node-ready",pid=202,fd=7))
	 cubic wscale:7,7 rto:204 rtt:0.28/0.1 bytes_sent:3000 bytes_acked:3001 bytes_received:12345 segs_out:20 segs_in:22
ESTAB 0      0      10.0.0.2:41004 10.0.0.1:6443 users:(("kube-node-ready",pid=202,fd=9))
	 cubic wscale:7,7 rto:204 rtt:0.5/0.25 segs_out:1 segs_in:1
CLOSE-WAIT 1 0      10.0.0.2:41006 10.0.0.1:6443 users:(("kubelet",pid=101,fd=14))
	 cubic bytes_received:999
ESTAB 0      0      10.0.0.2:41008 10.0.0.1:6443 users:(("containerd",pid=303,fd=3))
	 cubic bytes_received:77
`

// TestParseSockets: each established connection of the process named is
// keyed by its local address with the bytes it received; a connection that
// received nothing yet, one that is closing and another process's are not
// there; no name takes every process.
func TestParseSockets(t *testing.T) {
	for _, tc := range []struct {
		process string
		want    socketBytes
	}{
		{"kubelet", socketBytes{"10.0.0.2:41000": 52000}},
		{"kube-node-ready", socketBytes{"10.0.0.2:41002": 12345}},
		{"", socketBytes{"10.0.0.2:41000": 52000, "10.0.0.2:41002": 12345, "10.0.0.2:41008": 77}},
		{"kube-proxy", socketBytes{}},
	} {
		if got := parseSockets(ssOutput, tc.process); !maps.Equal(got, tc.want) {
			t.Errorf("parseSockets(%q) = %v, want %v", tc.process, got, tc.want)
		}
	}
	if got := parseSockets("", "kubelet"); len(got) != 0 {
		t.Errorf("no output: %v, want nothing", got)
	}
}

// TestReceived: bytes are counted from the start's figure for a connection
// that was there, from its opening for a new one; a connection gone by the
// end is counted as closed and adds nothing.
func TestReceived(t *testing.T) {
	start := socketBytes{"a": 100, "b": 50, "gone": 70}
	end := socketBytes{"a": 400, "b": 50, "new": 30}
	bytes, closed := received(start, end)
	if bytes != 300+0+30 || closed != 1 {
		t.Errorf("received = %d bytes, %d closed; want 330, 1", bytes, closed)
	}
}

// TestAuditByClient: requests are counted by class, verb and resource when
// received inside the window, watches when they start in it; the seconds a
// class's watches were open are clipped to the window; a watch open at its
// start is returned (with its URI unescaped) for the copies; lines of no
// class, other stages and garbage count nothing.
func TestAuditByClient(t *testing.T) {
	from := time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC)
	to := from.Add(10 * time.Minute)
	at := func(d time.Duration) string { return from.Add(d).Format(time.RFC3339Nano) }
	line := func(id, stage, verb, user, uri, resource, sub string, received, staged time.Duration) string {
		obj := ""
		if resource != "" {
			obj = `,"objectRef":{"resource":"` + resource + `","subresource":"` + sub + `"}`
		}
		return `{"auditID":"` + id + `","stage":"` + stage + `","verb":"` + verb + `","requestURI":"` + uri +
			`","user":{"username":"` + user + `"},"requestReceivedTimestamp":"` + at(received) +
			`","stageTimestamp":"` + at(staged) + `"` + obj + "}\n"
	}
	const (
		kubelet = "system:node:n1"
		agent   = "system:serviceaccount:kube-node-ready:kube-node-ready-agent"
		nodeURI = "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&watch=true"
	)
	log := line("1", "ResponseComplete", "get", kubelet, "/api/v1/nodes/n1", "nodes", "", time.Minute, time.Minute) +
		line("2", "ResponseComplete", "patch", kubelet, "/api/v1/nodes/n1/status", "nodes", "status", 2*time.Minute, 2*time.Minute) +
		line("3", "RequestReceived", "get", kubelet, "/api/v1/nodes/n1", "nodes", "", 3*time.Minute, 3*time.Minute) +
		line("4", "ResponseComplete", "get", kubelet, "/api/v1/nodes/n1", "nodes", "", -time.Minute, -time.Minute) +
		line("5", "ResponseComplete", "get", kubelet, "/api/v1/nodes/n1", "nodes", "", 10*time.Minute, 10*time.Minute) +
		// The agent's watch opened before the window and still open after it.
		line("6", "ResponseStarted", "watch", agent, nodeURI, "nodes", "", -5*time.Minute, -5*time.Minute) +
		// One opened in the window and ended 2 minutes later.
		line("7", "ResponseStarted", "watch", agent, "/api/v1/namespaces/kube-node-ready/pods?watch=true", "pods", "", 4*time.Minute, 4*time.Minute) +
		line("7", "ResponseComplete", "watch", agent, "/api/v1/namespaces/kube-node-ready/pods?watch=true", "pods", "", 4*time.Minute, 6*time.Minute) +
		// One that ended before the window.
		line("8", "ResponseStarted", "watch", agent, "/apis/discovery.k8s.io/v1/endpointslices?watch=true", "endpointslices", "", -9*time.Minute, -9*time.Minute) +
		line("8", "ResponseComplete", "watch", agent, "/apis/discovery.k8s.io/v1/endpointslices?watch=true", "endpointslices", "", -9*time.Minute, -8*time.Minute) +
		line("9", "ResponseComplete", "get", agent, "/readyz", "", "", 5*time.Minute, 5*time.Minute) +
		line("10", "ResponseComplete", "get", "system:apiserver", "/api/v1/nodes/n1", "nodes", "", time.Minute, time.Minute) +
		"not json\n"
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	classOf := func(user, _ string) string {
		switch {
		case strings.HasPrefix(user, "system:node:"):
			return "kubelet"
		case strings.HasPrefix(user, "system:serviceaccount:kube-node-ready:"):
			return "agent"
		}
		return ""
	}
	calls, open, err := auditByClient(path, from, to, classOf)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 {
		t.Fatalf("classes %v, want kubelet and agent", calls)
	}
	k, a := calls["kubelet"], calls["agent"]
	if want := map[string]int{"get nodes": 1, "patch nodes/status": 1}; !maps.Equal(k.requests, want) || len(k.watchesOpened) != 0 || k.watchSeconds != 0 {
		t.Errorf("kubelet: requests %v, watches %v, %v s; want %v and no watch", k.requests, k.watchesOpened, k.watchSeconds, want)
	}
	if want := map[string]int{"get /readyz": 1}; !maps.Equal(a.requests, want) {
		t.Errorf("agent: requests %v, want %v", a.requests, want)
	}
	if want := map[string]int{"pods": 1}; !maps.Equal(a.watchesOpened, want) {
		t.Errorf("agent: watches opened %v, want %v", a.watchesOpened, want)
	}
	// The node watch the whole window (600 s), the pods' 2 minutes.
	if a.watchSeconds != 720 {
		t.Errorf("agent: watches open %v s, want 720", a.watchSeconds)
	}
	if k.total() != 2 || a.total() != 2 {
		t.Errorf("totals: kubelet %d, agent %d; want 2 and 2", k.total(), a.total())
	}
	if len(open) != 1 || open[0].class != "agent" || open[0].uri != "/api/v1/nodes?fieldSelector=metadata.name=n1&watch=true" {
		t.Errorf("open at the start: %+v, want the agent's node watch, unescaped", open)
	}
}
