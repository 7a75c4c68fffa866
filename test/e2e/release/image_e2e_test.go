//go:build e2e

package release_test

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The parts of the OCI image layout the checks read.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	MediaType   string            `json:"mediaType"`
	Manifests   []ociDescriptor   `json:"manifests"`
	Annotations map[string]string `json:"annotations"`
}

type ociManifest struct {
	Config ociDescriptor   `json:"config"`
	Layers []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// checkImage reads the image's OCI archive: one index tagged VERSION, for
// linux/amd64 and linux/arm64, its version label on the index and on each
// image, every blob matching its digest. It runs the binary of this
// machine's platform with --version, and returns each platform's binary's
// sha256 for the SBOM check.
func checkImage(t *testing.T, r release, img string) map[string]string {
	files := readTarFile(t, filepath.Join(r.dir, img+"-"+r.version+".oci.tar"), false)
	blob := func(d ociDescriptor, v any) []byte {
		t.Helper()
		hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
		e, found := files["blobs/sha256/"+hexDigest]
		if !ok || !found {
			t.Fatalf("blob %s (%s) not in the archive", d.Digest, d.MediaType)
		}
		if sha256Hex(e.data) != hexDigest {
			t.Fatalf("blob %s: content does not match its digest", d.Digest)
		}
		if v != nil {
			if err := json.Unmarshal(e.data, v); err != nil {
				t.Fatalf("blob %s (%s): %v", d.Digest, d.MediaType, err)
			}
		}
		return e.data
	}

	var layout ociIndex
	if err := json.Unmarshal(files["index.json"].data, &layout); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(layout.Manifests) != 1 {
		t.Fatalf("index.json lists %d images, want 1", len(layout.Manifests))
	}
	ref := "ghcr.io/kube-node-ready/" + img + ":" + r.version
	if a := layout.Manifests[0].Annotations; a["io.containerd.image.name"] != ref || a["org.opencontainers.image.ref.name"] != r.version {
		t.Errorf("index.json names the image %v, want %s", a, ref)
	}
	var idx ociIndex
	blob(layout.Manifests[0], &idx)
	if idx.Annotations["org.opencontainers.image.version"] != r.version {
		t.Errorf("image index annotations %v, want org.opencontainers.image.version=%s", idx.Annotations, r.version)
	}

	sums := map[string]string{}
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			t.Fatalf("index entry %s without a platform", m.Digest)
		}
		plat := m.Platform.OS + "/" + m.Platform.Architecture
		var man ociManifest
		blob(m, &man)
		var cfg ociConfig
		blob(man.Config, &cfg)
		if cfg.OS+"/"+cfg.Architecture != plat || cfg.Config.Labels["org.opencontainers.image.version"] != r.version ||
			!slices.Equal(cfg.Config.Entrypoint, []string{"/" + img}) {
			t.Errorf("%s: config %s/%s, labels %v, entrypoint %v; want %s, version label %s, entrypoint /%s",
				plat, cfg.OS, cfg.Architecture, cfg.Config.Labels, cfg.Config.Entrypoint, plat, r.version, img)
		}
		if len(man.Layers) != 1 {
			t.Fatalf("%s: %d layers, want 1", plat, len(man.Layers))
		}
		layer := readTarBytes(t, blob(man.Layers[0], nil), strings.HasSuffix(man.Layers[0].MediaType, "+gzip"), plat+" layer")
		checkDated(t, layer, r.epoch, plat+" layer")
		bin, ok := layer[img]
		if !ok {
			t.Fatalf("%s: the layer has no /%s", plat, img)
		}
		sums[plat] = sha256Hex(bin.data)
		if plat == runtime.GOOS+"/"+runtime.GOARCH {
			checkVersion(t, r, img, bin.data)
		}
	}
	if got := slices.Sorted(maps.Keys(sums)); !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("image platforms %v, want linux/amd64 and linux/arm64", got)
	}
	return sums
}

// checkVersion runs a binary of the release with --version: it must say the
// release's version.
func checkVersion(t *testing.T, r release, name string, bin []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), name+" "+r.version+" ") {
		t.Errorf("%s --version: %v %q, want %q first", name, err, out, name+" "+r.version)
	}
}
