//go:build e2e

// Package release_test builds a release with `make release` once, into a
// temporary directory, and checks that it holds everything a release
// publishes, that its parts carry the VERSION file's version, and that the
// same commit gives the same bytes: its images are compared with the ones
// `make images` built from the same commit for the e2e tests (bin/images),
// and its archives are dated the commit and root-owned, with gzip headers
// that name no file and no time.
package release_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var images = []string{"kube-node-ready-agent", "kube-node-ready-webhook"}

// release is what the checks need to know about a built release.
type release struct {
	root    string // the repository
	dir     string // the release directory
	version string // the VERSION file
	epoch   time.Time
}

func TestRelease(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := strconv.ParseInt(run(t, root, "git", "log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatalf("commit time: %v", err)
	}
	r := release{root: root, version: strings.TrimSpace(string(b)), epoch: time.Unix(epoch, 0)}

	// One build per run: a second `make release` only to compare bytes cost
	// about a minute warm. The images, the part built by the most code, are
	// compared with make images' independent build of the same commit.
	r.dir = filepath.Join(t.TempDir(), "release")
	start := time.Now()
	makeRelease(t, root, r.dir)
	t.Logf("make release RELEASE_DIR=%s: %s", r.dir, time.Since(start).Round(time.Second))
	first := fileSums(t, r.dir)

	t.Run("reproducible", func(t *testing.T) {
		binDir := os.Getenv("KNR_BIN_DIR")
		if binDir == "" {
			binDir = filepath.Join(root, "bin")
		}
		commit := run(t, root, "git", "rev-parse", "--short", "HEAD")
		for _, img := range images {
			built := filepath.Join(binDir, "images", img+".tar")
			b, err := os.ReadFile(built)
			if err != nil {
				t.Fatalf("%v: run `make images` first (make e2e and make test do)", err)
			}
			name := img + "-" + r.version + ".oci.tar"
			if sum := sha256Hex(b); sum != first[name] {
				t.Errorf("%s: sha256 %s; make images built %s from the same commit (%s, version %s) with sha256 %s: "+
					"the same commit gave other bytes (or %s is from other sources: run `make images` and this test again)",
					name, first[name], built, commit, r.version, sum, built)
			}
		}
		for name := range first {
			if strings.HasSuffix(name, ".tgz") || strings.HasSuffix(name, ".tar.gz") {
				checkGzipHeader(t, filepath.Join(r.dir, name))
			}
		}
	})
	t.Run("files", func(t *testing.T) {
		want := []string{
			"SHA256SUMS",
			"kube-node-ready-" + r.version + ".tgz",
			"kube-node-ready-manifests-" + r.version + ".tar.gz",
			"node-ready.yaml",
		}
		for _, img := range images {
			want = append(want, img+"-"+r.version+".oci.tar", img+"-"+r.version+".spdx.json")
		}
		for _, p := range pluginPlatforms {
			want = append(want, "kubectl-node_ready_"+p+".tar.gz")
		}
		slices.Sort(want)
		got := make([]string, 0, len(first))
		for name := range first {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("release files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("SHA256SUMS", func(t *testing.T) {
		listed := readSums(t, filepath.Join(r.dir, "SHA256SUMS"))
		for name, sum := range first {
			if name != "SHA256SUMS" && listed[name] != sum {
				t.Errorf("SHA256SUMS lists %s as %q, its sha256 is %s", name, listed[name], sum)
			}
		}
		if len(listed) != len(first)-1 {
			t.Errorf("SHA256SUMS lists %d files, the release has %d besides it", len(listed), len(first)-1)
		}
	})
	binaries := map[string]map[string]string{} // image -> platform -> sha256 of its binary
	for _, img := range images {
		t.Run("image "+img, func(t *testing.T) { binaries[img] = checkImage(t, r, img) })
	}
	for _, img := range images {
		t.Run("SBOM "+img, func(t *testing.T) { checkSBOM(t, r, img, binaries[img]) })
	}
	t.Run("chart", func(t *testing.T) { checkChart(t, r) })
	t.Run("chart pushed to an OCI registry", func(t *testing.T) { checkChartPush(t, r) })
	t.Run("manifests", func(t *testing.T) { checkManifests(t, r) })
	t.Run("kubectl plugin", func(t *testing.T) { checkPlugin(t, r) })
}

// makeRelease runs `make release` into dir, as a user would, with the Go
// build cache of the environment; the Makefile of a calling make (make e2e)
// does not leak its flags in.
func makeRelease(t *testing.T, root, dir string) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "release", "RELEASE_DIR="+dir)
	cmd.Dir = root
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make release RELEASE_DIR=%s: %v\n%s", dir, err, out)
	}
}

// fileSums is the sha256 of every file under dir, by path relative to it;
// a directory or other non-regular entry (say, a build tree left behind)
// fails the test.
func fileSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			t.Errorf("%s: %s is not a regular file", dir, e.Name())
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sums[e.Name()] = sha256Hex(b)
	}
	return sums
}

// readSums parses sha256sum's output ("<hex>  <name>" per line).
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("%s: line %q is not sha256sum output", path, sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// run runs a command in dir and returns its trimmed standard output.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}
