package kubectlplugin

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is krew's Plugin manifest (v1alpha2); decoding strictly
// catches a field krew does not know.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest renders the manifest with the script `make dist` runs,
// from stand-in archives, and checks what krew needs: one platform per
// archive, the archive's URI and sha256, the binary's name.
func TestKrewManifest(t *testing.T) {
	for _, tt := range []struct{ version, want string }{
		{"v1.2.3", "v1.2.3"},
		{"0.1.0", "v0.1.0"},
		{"cf35e14-dirty", "v0.0.0-cf35e14-dirty"},
	} {
		t.Run(tt.version, func(t *testing.T) {
			dist := t.TempDir()
			sums := map[string]string{}
			for _, p := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
				content := []byte("archive of " + p)
				if err := os.WriteFile(filepath.Join(dist, "kubectl-node_ready_"+p+".tar.gz"), content, 0o644); err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(content)
				sums[p] = hex.EncodeToString(sum[:])
			}
			out, err := exec.Command("bash", renderScript(t), tt.version, "https://example.com/download/"+tt.version+"/", dist).Output()
			if err != nil {
				t.Fatalf("render.sh: %v", err)
			}
			var m krewPlugin
			if err := yaml.UnmarshalStrict(out, &m); err != nil {
				t.Fatalf("manifest is not the expected YAML: %v\n%s", err, out)
			}
			if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "node-ready" ||
				m.Spec.Version != tt.want || m.Spec.ShortDescription == "" {
				t.Errorf("manifest head %+v, want a Plugin node-ready at version %s", m, tt.want)
			}
			if len(m.Spec.Platforms) != len(sums) {
				t.Fatalf("%d platforms, want %d", len(m.Spec.Platforms), len(sums))
			}
			for _, p := range m.Spec.Platforms {
				key := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
				wantURI := "https://example.com/download/" + tt.version + "/kubectl-node_ready_" + key + ".tar.gz"
				if p.URI != wantURI || p.SHA256 != sums[key] || p.Bin != "kubectl-node_ready" || len(p.Files) != 1 || p.Files[0].From != "*" {
					t.Errorf("platform %s = %+v, want uri %s, sha256 %s, bin kubectl-node_ready", key, p, wantURI, sums[key])
				}
			}
		})
	}
	t.Run("missing archive", func(t *testing.T) {
		out, err := exec.Command("bash", renderScript(t), "v1.0.0", "https://example.com", t.TempDir()).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "missing: run make dist") {
			t.Errorf("render.sh without archives: %v %s, want a failure naming make dist", err, out)
		}
	})
}

// renderScript returns the path of plugins/krew/render.sh after reading it
// and the template it renders: the script runs in a child process, whose
// reads Go's test cache does not see, and a file the test itself opened
// makes a change to it rerun the test.
func renderScript(t *testing.T) string {
	t.Helper()
	const script = "../../plugins/krew/render.sh"
	for _, f := range []string{script, "../../plugins/krew/node-ready.yaml.tmpl"} {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	return script
}
