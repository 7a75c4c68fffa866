package checks

import (
	"fmt"
	"reflect"
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
			name: "https ipv6 with a path and options",
			in:   "https://[fd00::1]:8443/healthz#status=200&insecure=true",
			want: ProbeTarget{Scheme: "https", Address: "[fd00::1]:8443", URL: "https://[fd00::1]:8443/healthz", StatusMin: 200, StatusMax: 200, Insecure: true},
		},
		{
			name: "http ipv6 zone keeps its escape in the URL",
			in:   "http://[fe80::1%25eth0]:9099/",
			want: ProbeTarget{Scheme: "http", Address: "[fe80::1%eth0]:9099", URL: "http://[fe80::1%25eth0]:9099/", StatusMin: 200, StatusMax: 299},
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
		{name: "http missing port after ipv6", in: "http://[fd00::1]/", wantErr: "missing port"},
		{name: "ipv6 bracket not closed", in: "http://[fd00::1:8080/", wantErr: "missing port"},
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
