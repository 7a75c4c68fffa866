package plugins

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// secretLayout builds a secrets directory as the kubelet mounts a Secret
// (key -> ..data/key, ..data -> ..<timestamp>), plus a file outside it and
// links that lead out. It returns the directory and the outside file.
func secretLayout(t *testing.T) (dir, outside string) {
	t.Helper()
	dir, other := t.TempDir(), t.TempDir()
	outside = filepath.Join(other, "stolen")
	must(t, os.WriteFile(outside, []byte("outside-value\n"), 0o600))
	must(t, os.Mkdir(filepath.Join(dir, "..2026_11_24_20_00_00.1"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "..2026_11_24_20_00_00.1", "token"), []byte("inside-value\n"), 0o600))
	must(t, os.Symlink("..2026_11_24_20_00_00.1", filepath.Join(dir, "..data")))
	must(t, os.Symlink("..data/token", filepath.Join(dir, "token")))
	must(t, os.WriteFile(filepath.Join(dir, "plain"), []byte("inside-value\n"), 0o600))
	must(t, os.Symlink(outside, filepath.Join(dir, "link-out")))
	must(t, os.Symlink("../"+filepath.Base(other)+"/stolen", filepath.Join(dir, "relative-link-out")))
	return dir, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Secret files named in the configuration are read only from the secrets
// directory: a path elsewhere, one leaving it with "..", a relative one and a
// symlink leading out are refused with an error naming the plugin and key.
func TestSecretFilesStayInTheSecretsDir(t *testing.T) {
	dir, outside := secretLayout(t)
	plugins := []struct {
		key      string
		new      func(cleanup.Deps, []byte) (cleanup.Plugin, error)
		settings func(path string) string
	}{
		{"hook.authHeaderFile", rawNew(newHook), func(p string) string { return `{"url":"http://cmdb.invalid/x","authHeaderFile":"` + p + `"}` }},
		{"notify.urlFile", rawNew(newNotify), func(p string) string { return `{"urlFile":"` + p + `"}` }},
		{"portworx.tokenFile", rawNew(newPortworx), func(p string) string { return `{"endpoint":"http://px.invalid:9001","tokenFile":"` + p + `"}` }},
	}
	paths := []struct {
		name, path, wantErr string
	}{
		{"a file in the directory", filepath.Join(dir, "plain"), ""},
		{"a Secret volume's key (symlinks inside)", filepath.Join(dir, "token"), ""},
		{"a file elsewhere", outside, "outside the secrets directory"},
		{"the directory itself", dir, "outside the secrets directory"},
		{"leaving with ..", dir + "/../" + filepath.Base(filepath.Dir(outside)) + "/stolen", "must not contain .."},
		{"a relative path", "plain", "not an absolute path"},
		{"an absolute symlink leading out", filepath.Join(dir, "link-out"), "leads outside the secrets directory"},
		{"a relative symlink leading out", filepath.Join(dir, "relative-link-out"), "leads outside the secrets directory"},
	}
	for _, pl := range plugins {
		for _, tt := range paths {
			t.Run(pl.key+"/"+tt.name, func(t *testing.T) {
				d := cleanup.Deps{HTTP: &http.Client{}, Log: quiet, SecretsDir: dir}
				_, err := pl.new(d, []byte(pl.settings(tt.path)))
				switch {
				case tt.wantErr == "" && err != nil:
					t.Fatalf("err = %v, want the file accepted", err)
				case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), pl.key+":") || !strings.Contains(err.Error(), tt.wantErr)):
					t.Fatalf("err = %v, want %q naming %s", err, tt.wantErr, pl.key)
				}
			})
		}
	}
	t.Run("no secrets directory refuses every secret file", func(t *testing.T) {
		_, err := newNotify(cleanup.Deps{HTTP: &http.Client{}, Log: quiet}, []byte(`{"urlFile":"`+filepath.Join(dir, "plain")+`"}`))
		if err == nil || !strings.Contains(err.Error(), "notify.urlFile:") {
			t.Fatalf("err = %v, want notify.urlFile refused", err)
		}
	})
}

// A secret file that was inside when the configuration was loaded and is
// later swapped for a symlink leading out is refused when it is read: the
// hook fails and the receiver never sees the outside file's content.
func TestSecretFileSwappedForALinkOutIsNotSent(t *testing.T) {
	dir, outside := secretLayout(t)
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusOK)
	}))
	defer ts.Close()
	auth := filepath.Join(dir, "plain")
	p, err := newHook(cleanup.Deps{HTTP: &http.Client{}, Log: quiet, SecretsDir: dir}, []byte(`{"url":"`+ts.URL+`/x","authHeaderFile":"`+auth+`","retries":0}`))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.Remove(auth))
	must(t, os.Symlink(outside, auth))
	err = p.Cleanup(context.Background(), node("n1"))
	if err == nil || !strings.Contains(err.Error(), "hook.authHeaderFile:") {
		t.Errorf("Cleanup err = %v, want hook.authHeaderFile refused", err)
	}
	for _, a := range got {
		if strings.Contains(a, "outside-value") {
			t.Errorf("the receiver got the outside file's content as the auth header")
		}
	}
}
