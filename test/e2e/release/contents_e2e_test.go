//go:build e2e

package release_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var pluginPlatforms = []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"}

// checkChart reads the packaged chart: it carries the version as version and
// appVersion, its entries are dated the commit (helm dates them the time of
// packaging), and helm renders it with the images tagged VERSION.
func checkChart(t *testing.T, r release) {
	path := filepath.Join(r.dir, "kube-node-ready-"+r.version+".tgz")
	files := readTarFile(t, path, true)
	checkDated(t, files, r.epoch, path)
	var chart struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(files["kube-node-ready/Chart.yaml"].data, &chart); err != nil {
		t.Fatalf("Chart.yaml of the package: %v", err)
	}
	if chart.Name != "kube-node-ready" || chart.Version != r.version || chart.AppVersion != r.version {
		t.Errorf("packaged chart %+v, want kube-node-ready version and appVersion %s", chart, r.version)
	}
	out := run(t, r.root, filepath.Join(r.root, "bin", "helm"), "template", "knr", path, "--namespace", "kube-node-ready")
	for _, img := range images {
		if want := "image: ghcr.io/kube-node-ready/" + img + ":" + r.version + "\n"; !strings.Contains(out, want) {
			t.Errorf("helm template of the packaged chart has no %q", strings.TrimSpace(want))
		}
	}
}

// checkManifests reads the manifests archive: manifests/ exactly as `make
// manifests` wrote it into the repository (the VERSION file equals the
// chart's version, so the two renderings agree), dated the commit.
func checkManifests(t *testing.T, r release) {
	path := filepath.Join(r.dir, "kube-node-ready-manifests-"+r.version+".tar.gz")
	files := readTarFile(t, path, true)
	checkDated(t, files, r.epoch, path)
	repo := map[string][]byte{}
	err := filepath.WalkDir(filepath.Join(r.root, "manifests"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil {
			return err
		}
		repo[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range repo {
		if got, ok := files[name]; !ok || !bytes.Equal(got.data, want) {
			t.Errorf("%s: differs from the repository's %s (in the archive: %t)", path, name, ok)
		}
	}
	if len(files) != len(repo) {
		t.Errorf("%s holds %d files, the repository's manifests/ %d", path, len(files), len(repo))
	}
	if !strings.Contains(string(files["manifests/kube-node-ready.yaml"].data), "kube-node-ready-agent:"+r.version+"\n") {
		t.Errorf("manifests/kube-node-ready.yaml does not install the agent image tagged %s", r.version)
	}
}

// checkPlugin reads the kubectl plugin's release: the krew manifest at
// v<VERSION> pointing at each archive by its URI under the release's tag and
// its sha256, each archive holding the binary, and the binary for this
// machine saying the version.
func checkPlugin(t *testing.T, r release) {
	b, err := os.ReadFile(filepath.Join(r.dir, "node-ready.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("krew manifest: %v", err)
	}
	if m.Spec.Version != "v"+r.version || len(m.Spec.Platforms) != len(pluginPlatforms) {
		t.Errorf("krew manifest at version %s with %d platforms, want v%s and %d", m.Spec.Version, len(m.Spec.Platforms), r.version, len(pluginPlatforms))
	}
	for _, p := range m.Spec.Platforms {
		name := "kubectl-node_ready_" + p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"] + ".tar.gz"
		archive, err := os.ReadFile(filepath.Join(r.dir, name))
		if err != nil {
			t.Errorf("krew manifest names %s: %v", name, err)
			continue
		}
		if !strings.HasSuffix(p.URI, "/download/v"+r.version+"/"+name) || p.SHA256 != sha256Hex(archive) {
			t.Errorf("krew manifest: %s at %s with sha256 %s, want the release tag v%s and sha256 %s", name, p.URI, p.SHA256, r.version, sha256Hex(archive))
		}
	}
	for _, plat := range pluginPlatforms {
		path := filepath.Join(r.dir, "kubectl-node_ready_"+plat+".tar.gz")
		files := readTarFile(t, path, true)
		checkDated(t, files, r.epoch, path)
		bin, ok := files["kubectl-node_ready"]
		if !ok || bin.mode&0o111 == 0 {
			t.Errorf("%s: no executable kubectl-node_ready", path)
			continue
		}
		if plat == runtime.GOOS+"_"+runtime.GOARCH {
			checkVersion(t, r, "kubectl-node_ready", bin.data)
		}
	}
}
