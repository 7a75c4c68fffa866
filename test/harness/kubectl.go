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
	out, err := cp.Kubectl(context.Background(), strings.NewReader(stdin), append([]string{"--request-timeout=10s"}, args...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
