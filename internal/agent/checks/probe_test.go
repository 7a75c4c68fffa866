package checks

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/endpoints"
)

func probeServerMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		// Ends when the probe gives up and closes the connection.
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/client", func(w http.ResponseWriter, r *http.Request) {
		// r.Close is set by "Connection: close", which a client without keep-alive sends.
		if r.UserAgent() != "kube-node-ready-agent" || !r.Close {
			http.Error(w, fmt.Sprintf("user agent %q, close %v", r.UserAgent(), r.Close), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func endpointAddr(ep endpoints.Endpoint) string {
	return net.JoinHostPort(ep.Addr.String(), strconv.Itoa(int(ep.TCPPort)))
}

func TestProbeRun(t *testing.T) {
	srv := httptest.NewServer(probeServerMux())
	defer srv.Close()
	tlsSrv := httptest.NewUnstartedServer(probeServerMux())
	// The handshake the verifying client aborts is expected; keep it out of the test output.
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	open := "tcp://" + endpointAddr(listen(t, "127.0.0.1"))
	refused := "tcp://" + endpointAddr(downPeer(t, "127.0.0.1"))

	tests := []struct {
		name    string
		targets []string
		// timeout is the check's timeout, as the runner applies it.
		timeout time.Duration
		// wantErr are substrings of the error; none means the check passes.
		wantErr []string
	}{
		{name: "no targets passes"},
		{name: "http 200 passes", targets: []string{srv.URL + "/ok"}},
		{
			name:    "http 503 fails naming the target",
			targets: []string{srv.URL + "/down"},
			wantErr: []string{"probe: " + srv.URL + "/down: status 503, want 200-299"},
		},
		{name: "http 503 passes when expected", targets: []string{srv.URL + "/down#status=503"}},
		{
			name:    "exact status rejects another 2xx",
			targets: []string{srv.URL + "/ok#status=204"},
			wantErr: []string{"probe: " + srv.URL + "/ok: status 200, want 204"},
		},
		{
			name:    "redirect is not followed",
			targets: []string{srv.URL + "/redirect"},
			wantErr: []string{"probe: " + srv.URL + "/redirect: status 302, want 200-299"},
		},
		{name: "redirect passes when a 3xx is expected", targets: []string{srv.URL + "/redirect#status=300-399"}},
		{name: "sends the agent user agent and no keep-alive", targets: []string{srv.URL + "/client#status=204"}},
		{
			name:    "target timeout fails a slow endpoint",
			targets: []string{srv.URL + "/slow#timeout=100ms"},
			wantErr: []string{"probe: " + srv.URL + "/slow: no answer within 100ms"},
		},
		{
			name:    "check timeout wins over a longer target timeout",
			targets: []string{srv.URL + "/slow#timeout=1m"},
			timeout: 300 * time.Millisecond,
			wantErr: []string{"probe: " + srv.URL + "/slow: no answer within"},
		},
		{
			name:    "https self-signed fails certificate verification",
			targets: []string{tlsSrv.URL + "/ok"},
			wantErr: []string{"probe: " + tlsSrv.URL + "/ok: tls: failed to verify certificate"},
		},
		{name: "https self-signed passes with insecure", targets: []string{tlsSrv.URL + "/ok#insecure=true"}},
		{
			name:    "https insecure still checks the status",
			targets: []string{tlsSrv.URL + "/down#insecure=true"},
			wantErr: []string{"status 503, want 200-299"},
		},
		{
			name:    "http refused names the target",
			targets: []string{"http://" + strings.TrimPrefix(refused, "tcp://") + "/healthz"},
			wantErr: []string{"probe: http://" + strings.TrimPrefix(refused, "tcp://") + "/healthz: dial: connection refused"},
		},
		{name: "tcp listener passes", targets: []string{open}},
		{
			name:    "tcp refused names the target",
			targets: []string{refused},
			wantErr: []string{"probe: tcp " + strings.TrimPrefix(refused, "tcp://") + ": dial: connection refused"},
		},
		{
			name:    "every failure is named in the configured order",
			targets: []string{srv.URL + "/down", open, refused, srv.URL + "/ok"},
			wantErr: []string{fmt.Sprintf("probe: %s/down: status 503, want 200-299; tcp %s: dial: connection refused",
				srv.URL, strings.TrimPrefix(refused, "tcp://"))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var targets []ProbeTarget
			for _, s := range tt.targets {
				target, err := ParseProbeTarget(s)
				if err != nil {
					t.Fatal(err)
				}
				targets = append(targets, target)
			}
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			err := NewProbe(targets).Run(ctx)
			// Run ends with the check's context: some scheduling slack on a
			// loaded machine, never a target's own longer timeout (1m).
			if elapsed := time.Since(start); elapsed >= timeout+5*time.Second {
				t.Errorf("Run took %s, past the check's timeout %s", elapsed, timeout)
			}
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Run = %v, want pass", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Run passed, want %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Run = %v, want %q", err, want)
				}
			}
		})
	}
}

// A target that hangs must be named even when only the runner's timeout ends it.
func TestProbeNamesHungTargetWithinRunnerTimeout(t *testing.T) {
	srv := httptest.NewServer(probeServerMux())
	defer srv.Close()
	target, err := ParseProbeTarget(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	round := NewRunner([]Check{NewProbe([]ProbeTarget{target})}, 300*time.Millisecond, nil).Run(context.Background())
	want := "probe: " + srv.URL + "/slow: no answer within"
	if err := round.Results[0].Err; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Run = %v, want prefix %q", err, want)
	}
}

func TestZeroProbePasses(t *testing.T) {
	if err := (&Probe{}).Run(context.Background()); err != nil {
		t.Errorf("Run = %v", err)
	}
}
