package checks

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseProbeTarget(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ProbeTarget
	}{
		{
			name: "http defaults to any 2xx",
			in:   "http://127.0.0.1:9099/healthz",
			want: ProbeTarget{Scheme: "http", Address: "127.0.0.1:9099", URL: "http://127.0.0.1:9099/healthz", StatusMin: 200, StatusMax: 299},
		},
		{
			name: "http with status and timeout",
			in:   "http://127.0.0.1:9099/healthz#status=200&timeout=1s",
			want: ProbeTarget{Scheme: "http", Address: "127.0.0.1:9099", URL: "http://127.0.0.1:9099/healthz", StatusMin: 200, StatusMax: 200, Timeout: time.Second},
		},
		{
			name: "https with status range and insecure",
			in:   "https://localhost:8443/ready#insecure=true&status=200-399",
			want: ProbeTarget{Scheme: "https", Address: "localhost:8443", URL: "https://localhost:8443/ready", StatusMin: 200, StatusMax: 399, Insecure: true},
		},
		{
			name: "https with insecure false verifies",
			in:   "https://localhost:8443/#insecure=false",
			want: ProbeTarget{Scheme: "https", Address: "localhost:8443", URL: "https://localhost:8443/", StatusMin: 200, StatusMax: 299},
		},
		{
			name: "scheme is case-insensitive",
			in:   "HTTP://node.local:80/",
			want: ProbeTarget{Scheme: "http", Address: "node.local:80", URL: "http://node.local:80/", StatusMin: 200, StatusMax: 299},
		},
		{
			name: "http keeps the query and needs no path",
			in:   "http://[::1]:9099?verbose=1",
			want: ProbeTarget{Scheme: "http", Address: "[::1]:9099", URL: "http://[::1]:9099?verbose=1", StatusMin: 200, StatusMax: 299},
		},
		{
			name: "tcp",
			in:   "tcp://10.0.0.1:5000",
			want: ProbeTarget{Scheme: "tcp", Address: "10.0.0.1:5000"},
		},
		{
			name: "tcp ipv6 with timeout",
			in:   "tcp://[fd00::1]:5000#timeout=500ms",
			want: ProbeTarget{Scheme: "tcp", Address: "[fd00::1]:5000", Timeout: 500 * time.Millisecond},
		},
		{
			name: "tcp ipv6 zone is decoded",
			in:   "tcp://[fe80::1%25eth0]:5000",
			want: ProbeTarget{Scheme: "tcp", Address: "[fe80::1%eth0]:5000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProbeTarget(tt.in)
			if err != nil {
				t.Fatalf("ParseProbeTarget(%q) = %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseProbeTarget(%q) =\n %+v, want\n %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseProbeTargetRejects(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "no scheme", in: "127.0.0.1:9099", wantErr: "want scheme://host:port"},
		{name: "unknown scheme", in: "udp://10.0.0.1:53", wantErr: `unknown scheme "udp"`},
		{name: "missing host and port", in: "http:///healthz", wantErr: "missing host and port"},
		{name: "missing host", in: "tcp://:5000", wantErr: "missing host"},
		{name: "missing port", in: "http://127.0.0.1/healthz", wantErr: "missing port"},
		{name: "empty port", in: "tcp://10.0.0.1:", wantErr: "missing port"},
		{name: "missing port after ipv6", in: "tcp://[fd00::1]", wantErr: "missing port"},
		{name: "ipv6 without brackets", in: "tcp://fd00::1:5000", wantErr: "want host:port or [ipv6]:port"},
		{name: "port not a number", in: "http://127.0.0.1:http/", wantErr: `port "http" is not a number between 1 and 65535`},
		{name: "port zero", in: "tcp://10.0.0.1:0", wantErr: `port "0" is not a number between 1 and 65535`},
		{name: "port too large", in: "tcp://10.0.0.1:65536", wantErr: `port "65536" is not a number between 1 and 65535`},
		{name: "negative port", in: "tcp://10.0.0.1:-1", wantErr: `port "-1" is not a number between 1 and 65535`},
		{name: "unparsable url", in: "http://127.0.0.1:9099/%zz", wantErr: "bad URL"},
		{name: "bad host character", in: "tcp://a b:5000", wantErr: "bad URL"},
		{name: "user info", in: "http://user:secret@127.0.0.1:9099/", wantErr: "user info"},
		{name: "tcp with a path", in: "tcp://10.0.0.1:5000/healthz", wantErr: "takes no path"},
		{name: "unknown option", in: "http://127.0.0.1:9099/#retries=3", wantErr: `unknown option "retries"`},
		{name: "option without value", in: "http://127.0.0.1:9099/#status", wantErr: "not key=value"},
		{name: "empty options", in: "http://127.0.0.1:9099/#", wantErr: "not key=value"},
		{name: "option twice", in: "http://127.0.0.1:9099/#timeout=1s&timeout=2s", wantErr: "given twice"},
		{name: "status not a number", in: "http://127.0.0.1:9099/#status=ok", wantErr: `bad status "ok"`},
		{name: "status class", in: "http://127.0.0.1:9099/#status=2xx", wantErr: `bad status "2xx"`},
		{name: "status below 100", in: "http://127.0.0.1:9099/#status=99", wantErr: `bad status "99"`},
		{name: "status above 599", in: "http://127.0.0.1:9099/#status=600", wantErr: `bad status "600"`},
		{name: "status range reversed", in: "http://127.0.0.1:9099/#status=299-200", wantErr: `bad status "299-200"`},
		{name: "status range open", in: "http://127.0.0.1:9099/#status=200-", wantErr: `bad status "200-"`},
		{name: "status on tcp", in: "tcp://10.0.0.1:5000#status=200", wantErr: "http and https targets only"},
		{name: "timeout not a duration", in: "tcp://10.0.0.1:5000#timeout=soon", wantErr: `bad timeout "soon"`},
		{name: "timeout without unit", in: "tcp://10.0.0.1:5000#timeout=5", wantErr: `bad timeout "5"`},
		{name: "timeout zero", in: "tcp://10.0.0.1:5000#timeout=0s", wantErr: `timeout "0s" must be positive`},
		{name: "timeout negative", in: "http://127.0.0.1:9099/#timeout=-1s", wantErr: `timeout "-1s" must be positive`},
		{name: "insecure on http", in: "http://127.0.0.1:9099/#insecure=true", wantErr: "https targets only"},
		{name: "insecure on tcp", in: "tcp://10.0.0.1:5000#insecure=true", wantErr: "https targets only"},
		{name: "insecure not a boolean", in: "https://127.0.0.1:9443/#insecure=maybe", wantErr: `bad insecure "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProbeTarget(tt.in)
			if err == nil {
				t.Fatalf("ParseProbeTarget(%q) = %+v, want error %q", tt.in, got, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseProbeTarget(%q) = %v, want %q", tt.in, err, tt.wantErr)
			}
			if name := fmt.Sprintf("%q", tt.in); !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name the value %s", err, name)
			}
		})
	}
}

// probeServerMux answers the paths the probe tests use.
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

func endpointAddr(ep Endpoint) string {
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
			if elapsed := time.Since(start); elapsed >= timeout {
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
