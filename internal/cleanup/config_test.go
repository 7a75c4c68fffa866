package cleanup

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type settingsA struct {
	Endpoint string `json:"endpoint"`
	Count    int    `json:"count"`
}

func testTable() []Builtin {
	mk := func(name string) func(Deps, json.RawMessage) (Plugin, error) {
		return func(_ Deps, raw json.RawMessage) (Plugin, error) {
			var s settingsA
			if err := DecodeSettings(name, raw, &s); err != nil {
				return nil, err
			}
			return &fake{name: name}, nil
		}
	}
	return []Builtin{
		{Name: "a", Defaults: Spec{Enabled: true, Timeout: time.Second}, New: mk("a")},
		{Name: "b", Defaults: Spec{Critical: true, Timeout: time.Minute}, New: mk("b")},
		{Name: "c", Defaults: Spec{Timeout: time.Minute}, New: mk("c")},
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
dryRun: true
plugins:
  b:
    timeout: 90s
    after: [a]
    endpoint: http://x
  c:
    enabled: false
`), testTable())
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.DryRun {
		t.Error("dryRun not read")
	}
	b := cfg.Plugins["b"]
	if !b.Enabled || !b.Critical || b.Timeout != 90*time.Second || len(b.After) != 1 || string(b.Settings) != `{"endpoint":"http://x"}` {
		t.Errorf("b = %+v settings %s", b.Spec, b.Settings)
	}
	if a := cfg.Plugins["a"]; !a.Enabled || a.Timeout != time.Second {
		t.Errorf("a (not in the file) = %+v, want its defaults", a.Spec)
	}
	if cfg.Plugins["c"].Enabled {
		t.Error("c enabled: false ignored")
	}
}

func TestParseConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown plugin", "plugins:\n  nope: {}\n", "plugins.nope: unknown plugin"},
		{"unknown top-level key", "dryrun: true\n", "dryrun: unknown field"},
		{"bad timeout", "plugins:\n  a:\n    timeout: soon\n", "plugins.a.timeout"},
		{"negative timeout", "plugins:\n  a:\n    timeout: -1s\n", "plugins.a.timeout"},
		{"bad enabled", "plugins:\n  a:\n    enabled: perhaps\n", "plugins.a.enabled"},
		{"after unknown", "plugins:\n  a:\n    after: [zzz]\n", `plugins.a.after: unknown plugin "zzz"`},
		{"after itself", "plugins:\n  a:\n    after: [a]\n", "plugins.a.after: a plugin cannot run after itself"},
		{"cycle", "plugins:\n  a:\n    after: [b]\n  b:\n    after: [c]\n  c:\n    after: [a]\n", "ordering cycle a → b → c → a"},
		{"not YAML", "plugins: [\n", "config:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml), testTable())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestBuildErrorsNamePluginKeys(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"plugins:\n  b:\n    endpoint: 3\n", "plugins.b.endpoint: want string"},
		{"plugins:\n  b:\n    endpiont: x\n", "plugins.b.endpiont: unknown key"},
	}
	for _, tt := range tests {
		cfg, err := ParseConfig([]byte(tt.yaml), testTable())
		if err != nil {
			t.Fatal(err)
		}
		_, err = Build(cfg, testTable(), Deps{Log: slog.New(slog.DiscardHandler)}, false, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want %q", tt.yaml, err, tt.want)
		}
	}
}

func TestLoaderKeepsOldConfigOnInvalidFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("plugins:\n  b: {}\n")
	var invalid []error
	l := &Loader{Path: path, Table: testTable(), Deps: Deps{Log: slog.New(slog.DiscardHandler)}, Log: slog.New(slog.DiscardHandler), OnInvalid: func(err error) { invalid = append(invalid, err) }}
	if err := l.Load(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(l.Pipeline().Names(), ","); got != "a,b" {
		t.Fatalf("plugins = %s, want a,b", got)
	}
	write("plugins:\n  b:\n    timeout: never\n")
	l.Reload()
	l.Reload() // the same bad content is reported once
	if got := strings.Join(l.Pipeline().Names(), ","); got != "a,b" {
		t.Errorf("after an invalid file plugins = %s, want the old a,b", got)
	}
	if len(invalid) != 1 || !strings.Contains(invalid[0].Error(), "plugins.b.timeout") {
		t.Errorf("OnInvalid calls = %v, want one naming plugins.b.timeout", invalid)
	}
	write("plugins:\n  a:\n    enabled: false\n  c: {}\n")
	l.Reload()
	if got := strings.Join(l.Pipeline().Names(), ","); got != "c" {
		t.Errorf("after a valid change plugins = %s, want c", got)
	}
	invalid = nil
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	l.Reload()
	l.Reload() // the same unreadable file is reported once
	if got := strings.Join(l.Pipeline().Names(), ","); got != "c" {
		t.Errorf("after the file went away plugins = %s, want the old c", got)
	}
	if len(invalid) != 1 {
		t.Errorf("OnInvalid calls for a missing file = %v, want one", invalid)
	}
}
