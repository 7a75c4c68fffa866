package doclinks

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestDocumentLinks: no relative link or anchor of the project's documents
// is broken.
func TestDocumentLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "CHANGELOG.md", "charts/kube-node-ready/README.md", "manifests/README.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	if len(docs) < 10 {
		t.Fatalf("found %d documents under docs/, want the ten the README's table lists", len(docs))
	}
	problems, checked, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	// The README alone links every document under docs/: a checker that
	// found no links would prove nothing.
	if checked < len(docs) {
		t.Fatalf("checked %d links in %d files, want at least %d", checked, len(files), len(docs))
	}
	t.Logf("checked %d relative links in %d files", checked, len(files))
	for _, p := range problems {
		t.Error(p)
	}
}

func TestCheckReportsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## Flags\n\n## Flags\n\n## Health, metrics, `logs`\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/a.md) [ok](docs/a.md#flags-1) [ok](docs/a.md#health-metrics-logs) [ok](#top) [ok](docs/)",
		"[gone](docs/b.md) [no anchor](docs/a.md#flags-2) [here](#nowhere)",
		"[text over",
		"two lines](docs/a.md#nope)",
		"`[code](docs/c.md)` and [web](https://example.com/x#y)",
		"```",
		"[fenced](docs/d.md)",
		"```",
	}, "\n"))
	problems, checked, err := Check(root, []string{"README.md"})
	if err != nil {
		t.Fatal(err)
	}
	if checked != 9 {
		t.Errorf("checked %d links, want 9", checked)
	}
	want := []string{
		"README.md:3: link docs/b.md: no such file docs/b.md",
		"README.md:3: link docs/a.md#flags-2: docs/a.md has no heading with anchor #flags-2",
		"README.md:3: link #nowhere: README.md has no heading with anchor #nowhere",
		"README.md:5: link docs/a.md#nope: docs/a.md has no heading with anchor #nope",
	}
	slices.Sort(problems)
	slices.Sort(want)
	if !reflect.DeepEqual(problems, want) {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(problems, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestSlug(t *testing.T) {
	tests := map[string]string{
		"Health, metrics, logs, Events": "health-metrics-logs-events",
		"How long `make test` takes":    "how-long-make-test-takes",
		"Bypass, dry-run, uninstall":    "bypass-dry-run-uninstall",
		"The DaemonSet gate (issue 19)": "the-daemonset-gate-issue-19",
		"cleanup_status → what it says": "cleanup_status--what-it-says",
	}
	for in, want := range tests {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}
