package fleet

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestSharedServerAnswersByAddress: each request is answered by the agent
// of the address it was sent to, and an address whose agent stopped by 404.
func TestSharedServerAnswersByAddress(t *testing.T) {
	s, err := listenShared(":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.close(); err != nil {
			t.Error(err)
		}
	})
	port := strconv.Itoa(s.ln.Addr().(*net.TCPAddr).Port)
	answer := func(text string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, text) })
	}
	get := func(ip string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + net.JoinHostPort(ip, port) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	a := harness.Node{Name: "a", IP: "127.0.0.1"}
	b := harness.Node{Name: "b", IP: "127.0.0.2", IPs: []string{"127.0.0.2", "::1"}}
	s.add(a, answer("agent a"))
	s.add(b, answer("agent b"))
	for ip, want := range map[string]string{"127.0.0.1": "agent a", "127.0.0.2": "agent b", "::1": "agent b"} {
		if code, body := get(ip); code != http.StatusOK || body != want {
			t.Errorf("%s answered %d %q, want 200 %q", ip, code, body, want)
		}
	}
	s.remove(a)
	if code, _ := get("127.0.0.1"); code != http.StatusNotFound {
		t.Errorf("the address of a stopped agent answered %d, want 404", code)
	}
	if code, body := get("127.0.0.2"); code != http.StatusOK || body != "agent b" {
		t.Errorf("127.0.0.2 answered %d %q after a stopped, want 200 from agent b", code, body)
	}
}
