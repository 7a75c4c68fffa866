package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLaterTool(t *testing.T) {
	// A process that has ended: its ID names no process any more.
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	endedPID := strconv.Itoa(ended.Process.Pid)
	for _, tt := range []struct {
		name         string
		marker       string // the marker file's content; "" for none
		tool         bool   // the tool is in the bin directory
		removeMarker bool   // the builder finishes while the test waits
		toolLate     bool   // ... and writes the tool just before
		wantErr      string // "" for the tool's path
	}{
		{name: "no build running, tool there", tool: true},
		{name: "no build running, tool missing", wantErr: "run `make tools`"},
		{name: "build failed", marker: "failed: see bin/logs/tools-later.log", tool: true, wantErr: "failed: see bin/logs/tools-later.log"},
		{name: "builder gone, tool there", marker: endedPID, tool: true},
		{name: "builder gone, tool missing", marker: endedPID, wantErr: "run `make tools`"},
		{name: "garbage in the marker", marker: "what", tool: true, wantErr: "neither a process ID nor a failure"},
		{name: "waits for the running builder", marker: strconv.Itoa(os.Getpid()), removeMarker: true, tool: true},
		{name: "the builder says it is ready", marker: strconv.Itoa(os.Getpid()) + "\nready karpenter\nready kwok", tool: true},
		{name: "ready, but not there", marker: strconv.Itoa(os.Getpid()) + "\nready kwok", wantErr: "run `make tools`"},
		{name: "another tool ready: waits", marker: strconv.Itoa(os.Getpid()) + "\nready kwok-other", removeMarker: true, toolLate: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, LaterToolsFile)
			if tt.marker != "" {
				if err := os.WriteFile(marker, []byte(tt.marker+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tt.tool {
				if err := os.WriteFile(filepath.Join(dir, "kwok"), nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan struct{})
			if tt.removeMarker {
				go func() {
					defer close(done)
					time.Sleep(100 * time.Millisecond)
					if tt.toolLate {
						if err := os.WriteFile(filepath.Join(dir, "kwok"), nil, 0o755); err != nil {
							t.Error(err)
						}
					}
					os.Remove(marker)
				}()
			} else {
				close(done)
			}
			got, err := LaterTool(t.Context(), dir, "kwok")
			<-done
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("LaterTool: %v", err)
			case tt.wantErr == "" && got != filepath.Join(dir, "kwok"):
				t.Fatalf("LaterTool = %q, want the tool's path", got)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("LaterTool = %q, %v; want an error with %q", got, err, tt.wantErr)
			}
		})
	}
}

// TestFirstToolDoesNotWaitForTheLaterTools: a tool built before the tests
// (Prometheus, promtool) is found at once while make test still builds the
// later ones, and a missing one says to run make tools.
func TestFirstToolDoesNotWaitForTheLaterTools(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, LaterToolsFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "promtool"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var path string
	var err error
	go func() {
		defer close(done)
		path, err = FirstTool(dir, "promtool")
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("FirstTool waited for the later tools' build")
	}
	if err != nil || path != filepath.Join(dir, "promtool") {
		t.Errorf("FirstTool = %q, %v; want the tool's path", path, err)
	}
	if _, err := FirstTool(dir, "prometheus"); err == nil || !strings.Contains(err.Error(), "run `make tools`") {
		t.Errorf("a missing first tool: %v, want an error naming make tools", err)
	}
}
