package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Helm runs bin/helm against the API server with the admin kubeconfig and
// a helm home of its own under the plane's directory.
func (cp *ControlPlane) Helm(ctx context.Context, args ...string) (string, error) {
	home := filepath.Join(cp.Dir, "helm")
	cmd := exec.CommandContext(ctx, filepath.Join(cp.BinDir, "helm"), append(args, "--kubeconfig", cp.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// ChartDir is the chart's directory in this tree.
func ChartDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "charts", "kube-node-ready"), nil
}

// HelmT is Helm for a test: an error fails it.
func (cp *ControlPlane) HelmT(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := cp.Helm(tb.Context(), args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// LocalImageValues are the chart values every install on real nodes needs:
// the images `make images` built, imported into the nodes and never pulled,
// and the harness's stand-in for an internet name as the external DNS name
// (nothing may leave the machine). Further values follow as YAML in extra,
// which must not repeat the agent or webhook keys.
func (cp *ControlPlane) LocalImageValues(agentExtra, webhookExtra string) (string, error) {
	return imageValues(filepath.Join(cp.BinDir, "images", "kube-node-ready-agent.tar"),
		filepath.Join(cp.BinDir, "images", "kube-node-ready-webhook.tar"), agentExtra, webhookExtra)
}

// imageValues are LocalImageValues for the images in the OCI layout
// tarballs agentTar and webhookTar.
func imageValues(agentTar, webhookTar, agentExtra, webhookExtra string) (string, error) {
	agentRef, err := ImageRef(agentTar)
	if err != nil {
		return "", err
	}
	webhookRef, err := ImageRef(webhookTar)
	if err != nil {
		return "", err
	}
	split := func(ref string) (string, string) {
		i := strings.LastIndex(ref, ":")
		return ref[:i], ref[i+1:]
	}
	ar, at := split(agentRef)
	wr, wt := split(webhookRef)
	return fmt.Sprintf(`agent:
  image: {repository: %q, tag: %q, pullPolicy: Never}
  dns: {externalNames: [%q]}
%s
webhook:
  image: {repository: %q, tag: %q, pullPolicy: Never}
%s
`, ar, at, ExternalName, indent(agentExtra), wr, wt, indent(webhookExtra)), nil
}

func indent(s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// ChartRelease is the release name tests install the chart under, so the
// chart's object names are the defaults the README shows
// (kube-node-ready, kube-node-ready-webhook, ...).
const ChartRelease = "kube-node-ready"
