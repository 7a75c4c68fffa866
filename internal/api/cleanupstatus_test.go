package api

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCleanupStatus(t *testing.T) {
	tests := []struct {
		name        string
		value       string
		wantErr     string
		wantSummary string
	}{
		{name: "a failed attempt waiting for its retry",
			value:       `{"attempt":2,"plugins":{"volumeattachments":"done","portworx":"failed: portworx: HTTP 500","log":"skipped: after portworx failed"},"retryIn":"20s"}`,
			wantSummary: "attempt 2, 1 failed"},
		{name: "running and pending",
			value:       `{"attempt":1,"plugins":{"volumeattachments":"running","notify":"running","portworx":"pending"}}`,
			wantSummary: "attempt 1, 2 running, 1 pending"},
		{name: "all finished",
			value:       `{"attempt":1,"plugins":{"volumeattachments":"done","notify":"dry run","log":"skipped"}}`,
			wantSummary: "attempt 1, 3 done"},
		{name: "a failure without an error is the bare result (earlier webhooks)",
			value:       `{"attempt":3,"plugins":{"hook":"timeout","log":"panic","a":"failure"}}`,
			wantSummary: "attempt 3, 3 failed"},
		// cleanup counts a plugin left out by its health probe as failed (a
		// critical one holds the node), so the summary does too.
		{name: "unhealthy is a failure",
			value:       `{"attempt":2,"plugins":{"hook":"unhealthy","log":"failed: unhealthy","a":"done"}}`,
			wantSummary: "attempt 2, 2 failed"},
		{name: "a state nobody writes counts as finished",
			value:       `{"attempt":1,"plugins":{"hook":"on fire","a":"done"}}`,
			wantSummary: "attempt 1, 2 done"},
		{name: "unknown fields are ignored", value: `{"attempt":1,"plugins":{},"next":"x"}`, wantSummary: "attempt 1, 0 done"},
		{name: "not JSON", value: `{attempt: 2`, wantErr: "not JSON"},
		{name: "empty", value: ``, wantErr: "not JSON"},
		{name: "a JSON string", value: `"done"`, wantErr: "not JSON"},
		{name: "wrong types", value: `{"attempt":"two","plugins":{}}`, wantErr: "not JSON"},
		{name: "plugin state not a string", value: `{"attempt":1,"plugins":{"log":3}}`, wantErr: "not JSON"},
		{name: "no attempt", value: `{"plugins":{"log":"done"}}`, wantErr: "attempt 0"},
		{name: "no plugins", value: `{"attempt":1}`, wantErr: "no plugins"},
		{name: "null", value: `null`, wantErr: "attempt 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseCleanupStatus(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Summary(); got != tt.wantSummary {
				t.Errorf("Summary = %q, want %q", got, tt.wantSummary)
			}
		})
	}
}

func TestPluginState(t *testing.T) {
	tests := []struct {
		in      string
		want    PluginState
		wantErr bool
	}{
		{in: "pending", want: PluginState{Phase: PluginPending}},
		{in: "running", want: PluginState{Phase: PluginRunning}},
		{in: "done", want: PluginState{Phase: PluginDone}},
		{in: "dry run", want: PluginState{Phase: PluginDryRun}},
		{in: "skipped", want: PluginState{Phase: PluginSkipped}},
		{in: "skipped: not run: portworx, which it runs after, failed", want: PluginState{Phase: PluginSkipped, Reason: "not run: portworx, which it runs after, failed"}},
		{in: "failed: portworx: HTTP 500", want: PluginState{Phase: PluginFailed, Reason: "portworx: HTTP 500"}},
		{in: "failed: unhealthy", want: PluginState{Phase: PluginFailed, Reason: "unhealthy"}},
		{in: "failure", want: PluginState{Phase: PluginFailed, Reason: "failure"}},
		{in: "timeout", want: PluginState{Phase: PluginFailed, Reason: "timeout"}},
		{in: "panic", want: PluginState{Phase: PluginFailed, Reason: "panic"}},
		{in: "unhealthy", want: PluginState{Phase: PluginFailed, Reason: "unhealthy"}},
		{in: "done: early", wantErr: true},
		{in: "", wantErr: true},
		{in: "Failed: x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePluginState(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParsePluginState = %+v, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParsePluginState = %+v, %v; want %+v", got, err, tt.want)
			}
			if again, err := ParsePluginState(got.String()); err != nil || again != got {
				t.Errorf("String %q reads back as %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestPluginNamesFailedFirst(t *testing.T) {
	s := &CleanupStatus{Attempt: 1, Plugins: map[string]string{"b": "done", "z": "failed: x", "a": "running", "c": "timeout", "u": "unhealthy"}}
	if got, want := s.PluginNames(), []string{"c", "u", "z", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("PluginNames = %v, want %v", got, want)
	}
}

// FuzzParseCleanupStatus: whatever the annotation holds, reading and
// summarizing it never panics.
func FuzzParseCleanupStatus(f *testing.F) {
	f.Add(`{"attempt":2,"plugins":{"portworx":"failed: HTTP 500"},"retryIn":"20s"}`)
	f.Add(`{"attempt":1,"plugins":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, value string) {
		s, err := ParseCleanupStatus(value)
		if err != nil {
			return
		}
		_ = s.Summary()
		_ = s.PluginNames()
	})
}
