package harness

import (
	"strings"
	"testing"
	"time"
)

func TestStartProcessMissingBinarySaysMakeTools(t *testing.T) {
	_, err := StartProcess(t.TempDir(), "etcd", "/nonexistent/etcd", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("err = %v, want a pointer to make tools naming etcd", err)
	}
}

func TestCrashedComponentReportsNameStatusAndLog(t *testing.T) {
	p, err := StartProcess(t.TempDir(), "fake-apiserver", "/bin/sh", []string{"-c", "echo bind: address already in use; exit 3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = waitFor(t.Context(), p, 10*time.Second, func() (bool, error) { return false, nil })
	if err == nil {
		t.Fatal("waitFor returned nil for a dead process")
	}
	for _, want := range []string{"fake-apiserver", "exit status 3", "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStopKillsProcessGroup(t *testing.T) {
	// The shell ignores SIGTERM and leaves a child behind: Stop must kill both.
	p, err := StartProcess(t.TempDir(), "stubborn", "/bin/sh", []string{"-c", "trap '' TERM; sleep 300 & wait"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := p.Stop(200 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop = %v, want a note that it had to kill", err)
	}
	if exited, _ := p.Exited(); !exited {
		t.Error("process still running after Stop")
	}
}
