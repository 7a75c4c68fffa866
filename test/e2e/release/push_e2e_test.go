//go:build e2e

package release_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// checkChartPush pushes the packaged chart with `helm push` to an OCI
// registry (knr-registry, in memory on loopback, built from
// hack/images), pulls it back, and expects the release's bytes.
func checkChartPush(t *testing.T, r release) {
	tmp := t.TempDir()
	registry := filepath.Join(tmp, "knr-registry")
	build := exec.Command("go", "build", "-o", registry, "./registry")
	build.Dir = filepath.Join(r.root, "hack", "images")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build knr-registry: %v\n%s", err, out)
	}
	srv := exec.Command(registry)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("knr-registry's address: %v", err)
	}
	addr = addr[:len(addr)-1]

	helm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(r.root, "bin", "helm"), args...)
		// A helm of its own: no registry login or cache of the user's.
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+tmp+"/config", "HELM_CACHE_HOME="+tmp+"/cache",
			"HELM_DATA_HOME="+tmp+"/data", "HELM_REGISTRY_CONFIG="+tmp+"/registry.json")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	chart := "kube-node-ready-" + r.version + ".tgz"
	helm("push", filepath.Join(r.dir, chart), "oci://"+addr+"/charts", "--plain-http")
	pulled := filepath.Join(tmp, "pulled")
	if err := os.Mkdir(pulled, 0o755); err != nil {
		t.Fatal(err)
	}
	helm("pull", "oci://"+addr+"/charts/kube-node-ready", "--version", r.version, "--plain-http", "-d", pulled)
	got, err := os.ReadFile(filepath.Join(pulled, chart))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(r.dir, chart))
	if err != nil {
		t.Fatal(err)
	}
	if sha256Hex(got) != sha256Hex(want) {
		t.Errorf("the chart pulled from the registry differs from the release's %s", chart)
	}
}
