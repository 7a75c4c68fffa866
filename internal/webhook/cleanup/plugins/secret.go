package plugins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// secretFiles reads the plugins' secret files (tokens, webhook URLs, auth
// headers), confined to one directory: the mounted Secret (--secrets-dir).
// A configuration can then not turn a plugin into a way of sending some
// other file of the pod — its ServiceAccount token, another Secret — to a
// URL of its choosing.
type secretFiles struct {
	// dir is the secrets directory; empty refuses every file.
	dir string
}

// read returns the content of the secret file path, trimmed of the newline
// editors and `kubectl create secret --from-file` leave behind. Errors name
// plugin and key, such as "hook.authHeaderFile: ...". It is checked at every
// read, not only when the configuration is loaded: a symlink swapped after
// the check is refused too.
func (s secretFiles) read(plugin, key, path string) (string, error) {
	rel, err := s.confine(path)
	if err != nil {
		return "", fmt.Errorf("%s.%s: %w", plugin, key, err)
	}
	// os.Root refuses to follow a symlink out of the directory, so a link
	// swapped between confine and here is refused too.
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return "", fmt.Errorf("%s.%s: secrets directory: %w", plugin, key, err)
	}
	defer root.Close()
	b, err := root.ReadFile(rel)
	if err != nil {
		return "", fmt.Errorf("%s.%s: %w", plugin, key, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s.%s: %s is empty", plugin, key, path)
	}
	return v, nil
}

// confine checks that path names a file inside the secrets directory, by its
// name and after symlinks are resolved (a Secret volume's keys are symlinks
// into the volume's own ..data directory, which is fine), and returns it
// relative to the directory.
func (s secretFiles) confine(path string) (string, error) {
	switch {
	case s.dir == "":
		return "", errors.New("no secrets directory is set (--secrets-dir), so secret files are refused")
	case !filepath.IsAbs(path):
		return "", fmt.Errorf("%q is not an absolute path; secret files must be in the secrets directory %s", path, s.dir)
	case slices.Contains(strings.Split(filepath.ToSlash(path), "/"), ".."):
		return "", fmt.Errorf("%q must not contain ..; secret files must be in the secrets directory %s", path, s.dir)
	}
	rel, ok := within(s.dir, path)
	if !ok {
		return "", fmt.Errorf("%q is outside the secrets directory %s (where the chart mounts webhook.cleanup.secretName)", path, s.dir)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	realDir, err := filepath.EvalSymlinks(s.dir)
	if err != nil {
		return "", fmt.Errorf("secrets directory: %w", err)
	}
	if _, ok := within(realDir, real); !ok {
		return "", fmt.Errorf("%q leads outside the secrets directory %s (a symlink to %s)", path, s.dir, real)
	}
	return rel, nil
}

// within returns path relative to dir when it lies strictly inside it.
func within(dir, path string) (string, bool) {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}
