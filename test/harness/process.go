package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is one component of the simulated cluster running as a child
// process in its own process group, its output captured in a log file.
type Process struct {
	// Name identifies the component in errors and log dumps.
	Name string
	// LogPath is the file that holds the process's stdout and stderr.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	exitErr error
	stopped bool
}

// StartProcess starts bin with args, its output in dir/<name>.log. The child is
// killed if the test process dies (Pdeathsig), so no component outlives a run
// that ends in a timeout or a crash.
func StartProcess(dir, name, bin string, args []string, env []string) (*Process, error) {
	return startProcess(dir, name, bin, args, env, 0)
}

// startProcess is StartProcess with extra clone flags (new namespaces).
func startProcess(dir, name, bin string, args []string, env []string, cloneflags uintptr) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: binary %s not found (run `make tools` or `make build`): %w", name, bin, err)
	}
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: cloneflags}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id of the component.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.exitErr
	default:
		return false, nil
	}
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitError describes why the process ended, with the tail of its log; it is
// the error a test reports when a component dies.
func (p *Process) ExitError() error {
	_, err := p.Exited()
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	return fmt.Errorf("%s exited unexpectedly (%s); last log lines:\n%s", p.Name, status, p.Tail(20))
}

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// errKilled is Stop's error for a process that ended only on SIGKILL.
var errKilled = errors.New("killed")

// Stop sends SIGTERM to the process group, waits up to grace, then kills it.
// Stopping an exited process is a no-op.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	if exited, _ := p.Exited(); exited {
		return nil
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return fmt.Errorf("%s did not stop within %s after SIGTERM: %w", p.Name, grace, errKilled)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s survived SIGKILL", p.Name)
	}
}

// Log returns the process's whole log.
func (p *Process) Log() (string, error) {
	b, err := os.ReadFile(p.LogPath)
	return string(b), err
}

// LogT is Log for a test: an error fails tb.
func (p *Process) LogT(tb testing.TB) string {
	tb.Helper()
	text, err := p.Log()
	if err != nil {
		tb.Fatalf("log of %s: %v", p.Name, err)
	}
	return text
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var buf bytes.Buffer
	for _, l := range lines {
		fmt.Fprintf(&buf, "  %s| %s\n", p.Name, l)
	}
	return buf.String()
}

// errExited is returned by waits that gave up because the process ended.
var errExited = errors.New("process exited")

// StatusKiB reads a kB field of /proc/PID/status (VmRSS, VmHWM, RssAnon, RssFile).
func (p *Process) StatusKiB(field string) (int, error) {
	v, err := statusKiB(p.Pid(), field)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.Name, err)
	}
	return v[0], nil
}

// StatusKiBT is StatusKiB for tests and benchmarks: an error fails tb.
func (p *Process) StatusKiBT(tb testing.TB, field string) int {
	tb.Helper()
	v, err := p.StatusKiB(field)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
