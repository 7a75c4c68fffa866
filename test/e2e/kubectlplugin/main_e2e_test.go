//go:build e2e

// Package kubectlplugin_test runs `kubectl node-ready` the way people do:
// the real kubectl (bin/kubectl) finds the freshly built kubectl-node_ready
// on its PATH and runs it against the real API server, where the real agent
// and the real webhook leave their marks on nodes.
package kubectlplugin_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	cp *harness.ControlPlane
	// pluginDir holds the kubectl-node_ready built for this run; it is put
	// first on kubectl's PATH.
	pluginDir string
)

func TestMain(m *testing.M) {
	harness.MainWithControlPlane(m, harness.Options{Logf: log.Printf}, func(ctx context.Context, c *harness.ControlPlane) error {
		cp = c
		// The agents here run on the default preset, as the chart's.
		if err := cp.ApplyChartRBAC(ctx, harness.AgentNamespace); err != nil {
			return err
		}
		pluginDir = filepath.Join(cp.Dir, "plugin-bin")
		return buildPlugin(pluginDir)
	})
}

// buildPlugin builds ./kubectl-node_ready of this tree into dir, so the test
// runs the code it was started with, never a stale bin/.
func buildPlugin(dir string) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build kubectl-node_ready: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", filepath.Join(dir, "kubectl-node_ready"), "./kubectl-node_ready")
	cmd.Dir = root
	// The flags of make build: its compile is in the build cache.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly -trimpath", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./kubectl-node_ready: %v\n%s", err, out)
	}
	return nil
}

// result is one run of kubectl.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// kubectl runs `bin/kubectl args...` with the plugin directory first on
// PATH, KUBECONFIG set to the admin kubeconfig unless env overrides it, and
// stdin. A kubectl that cannot be started fails the test.
func kubectl(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(cp.BinDir, "kubectl"), args...)
	cmd.Env = append(os.Environ(),
		"PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cp.Kubeconfig,
		"HOME="+t.TempDir(), // no ~/.kube/config of the machine
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run kubectl %v: %v", args, err)
	}
	return r
}

// plugin runs `kubectl node-ready args...` and fails the test unless it exits 0.
func plugin(t *testing.T, args ...string) result {
	t.Helper()
	r := kubectl(t, "", nil, append([]string{"node-ready"}, args...)...)
	if r.code != 0 {
		t.Fatalf("kubectl node-ready %v: %s", args, r)
	}
	return r
}

// table reads a table the plugin printed: one map per line from the header's
// column names to the cells (columns are separated by two or more spaces).
func table(t *testing.T, out string) []map[string]string {
	t.Helper()
	sep := regexp.MustCompile(`\s{2,}`)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := sep.Split(strings.TrimSpace(lines[0]), -1)
	var rows []map[string]string
	for _, l := range lines[1:] {
		cells := sep.Split(strings.TrimSpace(l), -1)
		if len(cells) != len(header) {
			t.Fatalf("line %q has %d cells, header %v has %d", l, len(cells), header, len(header))
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// rowsOf keeps the rows whose NAME is name.
func rowsOf(rows []map[string]string, name string) []map[string]string {
	var out []map[string]string
	for _, r := range rows {
		if r["NAME"] == name {
			out = append(out, r)
		}
	}
	return out
}

// condition is the agent's condition on n, or nil.
func condition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == api.ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// TestKubectlFindsThePlugin: kubectl lists the plugin from PATH and runs
// it for `kubectl node-ready`, passing --help and --version through.
func TestKubectlFindsThePlugin(t *testing.T) {
	list := kubectl(t, "", nil, "plugin", "list")
	if !strings.Contains(list.stdout, filepath.Join(pluginDir, "kubectl-node_ready")) {
		t.Fatalf("kubectl plugin list does not show %s:\n%s", pluginDir, list)
	}
	help := plugin(t, "--help")
	for _, want := range []string{"status", "why NODE", "bypass NODE", "unbypass NODE", "cleanup status", "cleanup skip NODE", "doctor", "--kubeconfig", "--context", "--output", "--yes"} {
		if !strings.Contains(help.stdout, want) {
			t.Errorf("kubectl node-ready --help lacks %q:\n%s", want, help.stdout)
		}
	}
	if v := plugin(t, "--version"); !strings.HasPrefix(v.stdout, "kubectl-node_ready ") {
		t.Errorf("--version: %q", v.stdout)
	}
	bad := kubectl(t, "", nil, "node-ready", "status", "--yes")
	if bad.code != 2 || !strings.Contains(bad.stderr, "--yes: flag does not apply to status") {
		t.Errorf("a flag of another command: %s; want exit 2 naming the flag", bad)
	}
}
