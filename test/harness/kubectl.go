package harness

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Kubectl runs bin/kubectl with the admin kubeconfig and returns its output.
func (cp *ControlPlane) Kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %v: %v: %s", args, err, out)
	}
	return string(out), nil
}

// KubectlT is Kubectl for a test, with stdin as text: every request gets
// 10 s, and an error fails the test.
func (cp *ControlPlane) KubectlT(tb testing.TB, stdin string, args ...string) string {
	tb.Helper()
	return cp.KubectlOK(tb, stdin, append([]string{"--request-timeout=10s"}, args...)...)
}

// KubectlOK is Kubectl for a test, with stdin as text (none when empty)
// and no time limit of its own: for the commands that wait (rollout status,
// wait, logs), which KubectlT's request timeout would cut short. It also
// works in a Cleanup function (after the test's context is cancelled). An
// error fails the test.
func (cp *ControlPlane) KubectlOK(tb testing.TB, stdin string, args ...string) string {
	tb.Helper()
	var in io.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	out, err := cp.Kubectl(context.Background(), in, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
