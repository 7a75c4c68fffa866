package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LaterToolsFile is the file in the bin directory that says the tools of
// `test/tools/build.sh later` (KWOK, Karpenter, kube-network-policies,
// cert-manager, staticcheck) are still being built.
// make test builds them while the e2e tests that need none of them run: it
// writes the builder's process ID here first, the builder adds a line
// "ready <rel>" for each tool or image as it is done, and make test replaces
// it all with a line starting "failed" when the build fails, or removes the
// file when it succeeds.
const LaterToolsFile = ".tools-later"

// laterToolsWait bounds how long a test waits for those tools: from empty Go
// caches on two busy cores they take about 15 minutes.
const laterToolsWait = 30 * time.Minute

// FirstTool is the path of rel in binDir, a tool of `test/tools/build.sh
// first` (the control plane, real nodes, helm, Prometheus and promtool),
// which make test builds before any test starts: it never waits for the
// later tools' build; an error naming `make tools` when it is not there.
func FirstTool(binDir, rel string) (string, error) {
	path := filepath.Join(binDir, rel)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%w (run `make tools`)", err)
	}
	return path, nil
}

// LaterTool is the path of the tool (or image tarball, or CRD directory) rel
// in binDir, waiting while make test still builds it: until the builder says
// it is ready, not for the later tools after it. It fails
// with the reason when their build failed, when the builder is gone without
// saying, or when the tool is not there after it: never a test that runs
// without its tool. A caller whose context bounds what it does with the tool
// (start a server within a minute) waits here first, with a context that does
// not bound the build.
func LaterTool(ctx context.Context, binDir, rel string) (string, error) {
	marker := filepath.Join(binDir, LaterToolsFile)
	ctx, cancel := context.WithTimeout(ctx, laterToolsWait)
	defer cancel()
	logged := false
	for {
		b, err := os.ReadFile(marker)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", marker, err)
		}
		state, ready, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if strings.HasPrefix(state, "failed") {
			return "", fmt.Errorf("%s: building the later tools %s", rel, state)
		}
		pid, err := strconv.Atoi(state)
		if err != nil {
			return "", fmt.Errorf("%s: %s holds %q, neither a process ID nor a failure", rel, marker, state)
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			// A run that was stopped leaves the file behind; what it built is
			// there or is reported missing below.
			break
		}
		if slices.Contains(strings.Split(ready, "\n"), "ready "+rel) {
			break
		}
		if !logged {
			fmt.Fprintf(os.Stderr, "harness: waiting for %s: make test is still building it (process %d)\n", rel, pid)
			logged = true
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s: still being built when the wait ended (at most %s, or the caller's deadline): %w", rel, laterToolsWait, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
	return FirstTool(binDir, rel)
}
