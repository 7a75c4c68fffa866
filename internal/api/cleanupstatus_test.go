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
		{name: "a failure without an error is the bare result",
			value:       `{"attempt":3,"plugins":{"hook":"timeout","log":"panic","a":"failure"}}`,
			wantSummary: "attempt 3, 3 failed"},
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

func TestPluginNamesFailedFirst(t *testing.T) {
	s := &CleanupStatus{Attempt: 1, Plugins: map[string]string{"b": "done", "z": "failed: x", "a": "running", "c": "timeout"}}
	if got, want := s.PluginNames(), []string{"c", "z", "a", "b"}; !slices.Equal(got, want) {
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
