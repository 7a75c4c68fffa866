package releasegen

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeHelmLike writes a chart archive the way helm v3 does: entries dated
// now, a gzip header with helm's comment and extra field.
func writeHelmLike(t *testing.T, path string, now time.Time) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Header.Comment, zw.Header.Extra = "Helm", []byte("+helm-extra")
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, body string }{{"c/Chart.yaml", "name: c\n"}, {"c/values.yaml", "a: 1\n"}, {"c/templates/x.yaml", "kind: X\n"}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNormalizeChartArchive(t *testing.T) {
	dir := t.TempDir()
	epoch := time.Unix(1700000000, 0)
	var results [][]byte
	for i, now := range []time.Time{time.Unix(1800000000, 0), time.Unix(1800000123, 0)} {
		path := filepath.Join(dir, string(rune('a'+i))+".tgz")
		writeHelmLike(t, path, now)
		if err := NormalizeChartArchive(path, epoch); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, b)
	}
	if !bytes.Equal(results[0], results[1]) {
		t.Error("two packagings at different times still differ after normalizing")
	}
	zr, err := gzip.NewReader(bytes.NewReader(results[0]))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Comment != "Helm" || string(zr.Extra) != "+helm-extra" {
		t.Errorf("gzip header comment %q extra %q, want helm's kept", zr.Comment, zr.Extra)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(epoch) || h.Mode != 0o644 {
			t.Errorf("%s: dated %s mode %o, want %s and helm's mode", h.Name, h.ModTime, h.Mode, epoch)
		}
	}
	if want := []string{"c/Chart.yaml", "c/values.yaml", "c/templates/x.yaml"}; len(names) != 3 || names[0] != want[0] || names[2] != want[2] {
		t.Errorf("entries %v, want helm's order %v", names, want)
	}
	if err := NormalizeChartArchive(filepath.Join(dir, "missing.tgz"), epoch); err == nil {
		t.Error("normalizing a missing archive: no error")
	}
}
