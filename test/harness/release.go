package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// PreviousReleaseFile names, on its last line that is not a comment, the
// commit the upgrade test builds "the previous release" from.
const PreviousReleaseFile = "PREVIOUS_RELEASE"

// Release is a release of the project built from one commit: its chart and
// its agent and webhook images, as the upgrade test installs them.
type Release struct {
	// Commit is the full commit the release was built from.
	Commit string
	// Chart is the directory of the release's chart.
	Chart string
	// AgentImage and WebhookImage are the images as OCI layout tarballs
	// (tagged previous-<commit>, so they sit beside the working tree's in a
	// node's containerd).
	AgentImage, WebhookImage string
}

// ImageValues are the chart values that run this release's images, imported
// into the real nodes and never pulled, with extra values as
// LocalImageValues takes them.
func (r *Release) ImageValues(agentExtra, webhookExtra string) (string, error) {
	return imageValues(r.AgentImage, r.WebhookImage, agentExtra, webhookExtra)
}

// PreviousReleaseCommit reads the commit named in root's PREVIOUS_RELEASE
// file and resolves it to a full commit of root's repository.
func PreviousReleaseCommit(ctx context.Context, root string) (string, error) {
	f, err := os.Open(filepath.Join(root, PreviousReleaseFile))
	if err != nil {
		return "", fmt.Errorf("previous release: %w", err)
	}
	defer f.Close()
	name, err := lastEntry(f)
	if err != nil {
		return "", fmt.Errorf("previous release: read %s: %w", f.Name(), err)
	}
	if name == "" {
		return "", fmt.Errorf("previous release: %s names no commit", f.Name())
	}
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--verify", name+"^{commit}").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("previous release: %s names %q, not a commit of this repository (a shallow clone? fetch it): %v: %s", PreviousReleaseFile, name, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// lastEntry is the last line of r that is neither blank nor a # comment,
// trimmed; "" when there is none.
func lastEntry(r io.Reader) (string, error) {
	var last string
	s := bufio.NewScanner(r)
	for s.Scan() {
		if l := strings.TrimSpace(s.Text()); l != "" && !strings.HasPrefix(l, "#") {
			last = l
		}
	}
	return last, s.Err()
}

// BuildRelease builds the release of commit — its chart and, with its own
// `make images`, its agent and webhook images for this machine's platform —
// from `git archive` of the commit, and caches it in binDir/releases/<commit>,
// so only the first call for a commit pays for the build. Nothing is
// skipped: a missing tool or a failed build is an error.
func BuildRelease(ctx context.Context, root, binDir, commit string, logf func(string, ...any)) (*Release, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	binDir, err := resolveBinDir(binDir)
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(binDir, "releases", commit)
	tag := "previous-" + commit[:12]
	r := &Release{
		Commit:       commit,
		Chart:        filepath.Join(cache, "chart"),
		AgentImage:   filepath.Join(cache, "kube-node-ready-agent.tar"),
		WebhookImage: filepath.Join(cache, "kube-node-ready-webhook.tar"),
	}
	if fileExists(filepath.Join(cache, "complete")) {
		return r, nil
	}
	start := time.Now()
	logf("building the release of %s (chart and images) into %s", commit[:12], cache)
	if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(filepath.Dir(cache), ".build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	out := filepath.Join(work, "out")
	for _, dir := range []string{src, out} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	if err := run(ctx, "", "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, commit, src); err != nil {
		return nil, fmt.Errorf("release %s: extract: %w", commit[:12], err)
	}
	epoch, err := exec.CommandContext(ctx, "git", "-C", root, "log", "-1", "--format=%ct", commit).Output()
	if err != nil {
		return nil, fmt.Errorf("release %s: commit time: %w", commit[:12], err)
	}
	// The release's own image build, with the version and commit a build
	// from its checkout would carry; only this machine's platform, as only
	// its nodes run it.
	if err := run(ctx, src, "make", "--no-print-directory", "images",
		"BIN="+filepath.Join(work, "bin"),
		"VERSION="+tag, "COMMIT="+commit[:7], "IMAGE_TAG="+tag,
		"PLATFORMS=linux/"+runtime.GOARCH, "PUSH=",
		"SOURCE_DATE_EPOCH="+strings.TrimSpace(string(epoch))); err != nil {
		return nil, fmt.Errorf("release %s: make images: %w", commit[:12], err)
	}
	for _, img := range []string{"kube-node-ready-agent.tar", "kube-node-ready-webhook.tar"} {
		if err := os.Rename(filepath.Join(work, "bin", "images", img), filepath.Join(out, img)); err != nil {
			return nil, fmt.Errorf("release %s: %w", commit[:12], err)
		}
	}
	if err := os.Rename(filepath.Join(src, "charts", "kube-node-ready"), filepath.Join(out, "chart")); err != nil {
		return nil, fmt.Errorf("release %s: chart: %w", commit[:12], err)
	}
	if err := os.WriteFile(filepath.Join(out, "complete"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return nil, err
	}
	_ = os.RemoveAll(cache) // an incomplete earlier attempt
	if err := os.Rename(out, cache); err != nil {
		return nil, fmt.Errorf("release %s: %w", commit[:12], err)
	}
	logf("release of %s built in %s", commit[:12], time.Since(start).Round(time.Second))
	return r, nil
}

// run runs a command in dir, its output kept for the error.
func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// GOWORK=off: the release builds as its own module, not as part of a
	// workspace around this tree; GOFLAGS as the Makefile's own.
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || len(out) > 0 {
			return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out, 4000))
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
