// Command knr-image builds the project's container images without a container
// engine or a registry: each image is one layer holding a static binary (plus
// the CA bundle and a passwd entry for the numeric non-root user), wrapped in
// an OCI image index with one manifest per platform. The index is written as an
// OCI layout tarball that `ctr images import` reads, and pushed to a registry
// when --push names one.
//
// It uses github.com/google/go-containerregistry, in a module of its own so the
// agent's and the webhook's dependency graphs never include it.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonrootUID is distroless' "nonroot" user; a numeric USER satisfies
// runAsNonRoot without the kubelet reading /etc/passwd.
const nonrootUID = 65532

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	ref      string
	binaries listFlag // os/arch=path
	inImage  string
	args     listFlag
	caBundle string
	labels   listFlag // key=value
	out      string
	push     string
	created  time.Time
}

func main() {
	var o options
	flag.StringVar(&o.ref, "ref", "", "image reference (repository:tag) recorded in the tarball, e.g. ghcr.io/kube-node-ready/kube-node-ready-agent:v0.1.0")
	flag.Var(&o.binaries, "binary", "os/arch=path of a static binary for that platform (repeat for each platform)")
	flag.StringVar(&o.inImage, "path", "", "path of the binary inside the image (default /<file name>); it is the entrypoint")
	flag.Var(&o.args, "arg", "default argument (CMD) of the image (repeatable)")
	flag.StringVar(&o.caBundle, "ca-bundle", "", "CA bundle to install as /etc/ssl/certs/ca-certificates.crt (empty: none)")
	flag.Var(&o.labels, "label", "key=value OCI label, set on each image config and as an annotation of the index (repeatable)")
	flag.StringVar(&o.out, "out", "", "write the image index as an OCI layout tarball here")
	flag.StringVar(&o.push, "push", "", "also push the index to this repository (tag taken from --ref), using the docker credential helpers")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: knr-image --ref REF --binary linux/amd64=PATH [--binary linux/arm64=PATH] --out FILE.tar [--push REPO]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	o.created = sourceDate()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "knr-image:", err)
		os.Exit(1)
	}
}

// sourceDate is the image creation time: SOURCE_DATE_EPOCH when set (the
// Makefile sets the commit time), so the same commit gives the same digests.
func sourceDate() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

func run(o options) error {
	if o.ref == "" || len(o.binaries) == 0 || (o.out == "" && o.push == "") {
		return errors.New("--ref, at least one --binary and --out or --push are required")
	}
	ref, err := name.ParseReference(o.ref)
	if err != nil {
		return fmt.Errorf("--ref %q: %w", o.ref, err)
	}
	labels := map[string]string{}
	for _, kv := range o.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--label %q: want key=value", kv)
		}
		labels[k] = v
	}
	var ca []byte
	if o.caBundle != "" {
		if ca, err = os.ReadFile(o.caBundle); err != nil {
			return fmt.Errorf("--ca-bundle: %w", err)
		}
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, spec := range o.binaries {
		plat, file, ok := strings.Cut(spec, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 {
			return fmt.Errorf("--binary %q: want os/arch=path", spec)
		}
		inImage := o.inImage
		if inImage == "" {
			inImage = "/" + filepath.Base(file)
		}
		img, err := image(file, inImage, o.args, ca, labels, osName, arch, o.created)
		if err != nil {
			return fmt.Errorf("%s: %w", plat, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}},
		})
	}
	if len(labels) > 0 {
		idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	}

	if o.out != "" {
		if err := writeLayoutTar(o.out, idx, ref, o.created); err != nil {
			return fmt.Errorf("write %s: %w", o.out, err)
		}
		d, _ := idx.Digest()
		fmt.Printf("wrote %s (%s, %d platform(s), %s)\n", o.out, ref.Name(), len(o.binaries), d)
	}
	if o.push != "" {
		dst, err := name.ParseReference(o.push + ":" + ref.Identifier())
		if err != nil {
			return fmt.Errorf("--push %q: %w", o.push, err)
		}
		if err := remote.WriteIndex(dst, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", dst, err)
		}
		fmt.Printf("pushed %s\n", dst.Name())
	}
	return nil
}

// image is one platform's image: a single layer and a config whose user,
// entrypoint and labels match the Dockerfiles.
func image(file, inImage string, args []string, ca []byte, labels map[string]string, osName, arch string, created time.Time) (v1.Image, error) {
	bin, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	uid := strconv.Itoa(nonrootUID)
	files := []tarEntry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + uid + ":" + uid + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:" + uid + ":\n")},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: nonrootUID},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: strings.TrimPrefix(inImage, "/"), mode: 0o755, data: bin},
	}
	if ca != nil {
		files = append(files,
			tarEntry{name: "etc/ssl/", mode: 0o755, dir: true},
			tarEntry{name: "etc/ssl/certs/", mode: 0o755, dir: true},
			tarEntry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca})
	}
	for dir := path.Dir(strings.TrimPrefix(inImage, "/")); dir != "."; dir = path.Dir(dir) {
		files = append(files, tarEntry{name: dir + "/", mode: 0o755, dir: true})
	}
	layerTar, err := buildTar(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = osName, arch
	cfg.Created = v1.Time{Time: created}
	cfg.Config.User = uid + ":" + uid
	cfg.Config.Entrypoint = []string{inImage}
	cfg.Config.Cmd = args
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.Labels = labels
	return mutate.ConfigFile(img, cfg)
}

type tarEntry struct {
	name string
	mode int64
	dir  bool
	uid  int
	data []byte
}

// buildTar writes the entries sorted by name (parents first) with a fixed
// time, so a layer's digest depends only on its content.
func buildTar(entries []tarEntry, mtime time.Time) ([]byte, error) {
	seen := map[string]bool{}
	var uniq []tarEntry
	for _, e := range entries {
		if !seen[e.name] {
			seen[e.name] = true
			uniq = append(uniq, e)
		}
	}
	sort.Slice(uniq, func(i, j int) bool { return uniq[i].name < uniq[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range uniq {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mtime, Uid: e.uid, Gid: e.uid, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayoutTar writes idx as an OCI image layout and tars it. The index
// entry carries the reference under both annotations importers read:
// containerd's io.containerd.image.name and OCI's ref.name. The tarball's
// entries are dated mtime and owned by root, so its bytes (not only the
// digests inside) are the same for the same commit: a release's SHA256SUMS
// names the tarball.
func writeLayoutTar(out string, idx v1.ImageIndex, ref name.Reference, mtime time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".knr-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref.Name(),
		"org.opencontainers.image.ref.name": ref.Identifier(),
	})); err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := tarDir(f, dir, mtime); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// tarDir tars dir's tree in lexical order (WalkDir's), keeping only each
// entry's name, type, permissions and size from the file system.
func tarDir(w io.Writer, dir string, mtime time.Time) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), ModTime: mtime, Typeflag: tar.TypeReg, Size: info.Size()}
		if d.IsDir() {
			h.Name, h.Typeflag, h.Size = h.Name+"/", tar.TypeDir, 0
		} else if !info.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file or directory", rel)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
