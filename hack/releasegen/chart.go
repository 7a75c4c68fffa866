package releasegen

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"time"
)

// NormalizeChartArchive rewrites the chart archive `helm package` wrote at
// path with every entry dated mtime. Helm stamps each entry with the time of
// packaging (helm v3.22 chartutil.Save), so two packagings of one commit
// differ; everything else it writes (entry order, modes, the gzip header's
// Helm comment and extra field) is kept, so helm reads, pushes and verifies
// the result as its own.
func NormalizeChartArchive(path string, mtime time.Time) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return fmt.Errorf("chart archive %s: %w", path, err)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Header = gzip.Header{Comment: zr.Comment, Extra: zr.Extra, Name: zr.Name, OS: zr.OS}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("chart archive %s: %w", path, err)
		}
		h.ModTime, h.AccessTime, h.ChangeTime = mtime, time.Time{}, time.Time{}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("chart archive %s: %s: %w", path, h.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("chart archive %s: %s: %w", path, h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
