//go:build e2e

package release_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"slices"
	"testing"
	"time"
)

// entry is one regular file of an archive.
type entry struct {
	data    []byte
	modTime time.Time
	mode    int64
}

// readTar returns the regular files of a tar stream by name.
func readTar(t *testing.T, r io.Reader, what string) map[string]entry {
	t.Helper()
	files := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", what, h.Name, err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: %s owned by %d:%d, want 0:0 (root), whoever built it", what, h.Name, h.Uid, h.Gid)
		}
		files[h.Name] = entry{data: b, modTime: h.ModTime, mode: h.Mode}
	}
}

// readTarFile reads a tar file, gzip-compressed when gz.
func readTarFile(t *testing.T, path string, gz bool) map[string]entry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return readTarBytes(t, b, gz, path)
}

func readTarBytes(t *testing.T, b []byte, gz bool, what string) map[string]entry {
	t.Helper()
	var r io.Reader = bytes.NewReader(b)
	if gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r = zr
	}
	return readTar(t, r, what)
}

// checkDated fails when a file of an archive is not dated the commit,
// naming the first such file and how many there are.
func checkDated(t *testing.T, files map[string]entry, epoch time.Time, what string) {
	t.Helper()
	var wrong []string
	for name, e := range files {
		if !e.modTime.Equal(epoch) {
			wrong = append(wrong, name+" dated "+e.modTime.UTC().String())
		}
	}
	if len(wrong) > 0 {
		slices.Sort(wrong)
		t.Errorf("%s: %d of %d files not dated the commit time %s, e.g. %s", what, len(wrong), len(files), epoch.UTC(), wrong[0])
	}
}

// checkGzipHeader fails when a gzip file's header carries what differs
// between builds of the same commit: a modification time or a file name.
func checkGzipHeader(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("%s: gzip header with time %s and name %q, want neither", path, zr.ModTime.UTC(), zr.Name)
	}
}
