package cleanup

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/clocktest"
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

// An invalid configuration at start (here a Secret file it names is missing)
// leaves no pipeline and says why; once the Secret file appears, the same
// configuration is loaded without a restart. The start's failure is Load's
// error (its caller reports it); ticks that find the same reason report
// nothing more.
func TestLoaderStartsInvalidAndPicksUpTheFixedSecret(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	table := []Builtin{{Name: "s", Defaults: Spec{Timeout: time.Second}, New: func(_ Deps, raw json.RawMessage) (Plugin, error) {
		var s struct {
			TokenFile string `json:"tokenFile"`
		}
		if err := DecodeSettings("s", raw, &s); err != nil {
			return nil, err
		}
		if _, err := os.ReadFile(s.TokenFile); err != nil {
			return nil, fmt.Errorf("s.tokenFile: %w", err)
		}
		return &fake{name: "s"}, nil
	}}}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("plugins:\n  s:\n    tokenFile: "+secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var invalid []error
	l := &Loader{Path: path, Table: table, Deps: Deps{Log: slog.New(slog.DiscardHandler)}, Log: slog.New(slog.DiscardHandler), OnInvalid: func(err error) { invalid = append(invalid, err) }}
	if err := l.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(); err == nil || !strings.Contains(err.Error(), "s.tokenFile") {
		t.Fatalf("Load = %v, want an error naming s.tokenFile", err)
	}
	if l.Pipeline() != nil || l.Err() == nil {
		t.Fatalf("after an invalid start: pipeline %v, Err %v; want none and the reason", l.Pipeline(), l.Err())
	}
	if v := testutil.ToFloat64(l.valid); v != 0 {
		t.Errorf("node_cleanup_config_valid = %v, want 0", v)
	}
	l.Reload()
	l.Reload()
	if len(invalid) != 0 || l.Pipeline() != nil {
		t.Errorf("OnInvalid calls %d (want none: the same reason as at start) and pipeline %v (want none) while the Secret file is missing", len(invalid), l.Pipeline())
	}
	if err := os.WriteFile(secret, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.Reload()
	if l.Pipeline() == nil || l.Err() != nil {
		t.Fatalf("after the Secret file appeared: pipeline %v, Err %v; want it loaded", l.Pipeline(), l.Err())
	}
	if v := testutil.ToFloat64(l.valid); v != 1 {
		t.Errorf("node_cleanup_config_valid = %v after the fix, want 1", v)
	}
}

// TestLoaderRereadsOnTheClock: Watch re-reads the file once every
// interval of its clock: a changed file is not applied a millisecond
// before the tick, and is at the tick.
func TestLoaderRereadsOnTheClock(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("plugins:\n  b: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := &Loader{Path: path, Table: testTable(), Deps: Deps{Log: slog.New(slog.DiscardHandler)}, Log: slog.New(slog.DiscardHandler), Clock: fc}
	if err := l.Load(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { l.Watch(ctx, time.Minute); close(done) }()
	defer func() { cancel(); <-done }()
	clocktest.Await(t, fc, 1) // the ticker
	if err := os.WriteFile(path, []byte("plugins:\n  a:\n    enabled: false\n  c: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	names := func() string { return strings.Join(l.Pipeline().Names(), ",") }
	fc.Step(time.Minute - time.Millisecond)
	if got := names(); got != "a,b" {
		t.Fatalf("a millisecond before the tick plugins = %s, want the old a,b", got)
	}
	fc.Step(time.Millisecond)
	clocktest.Until(t, "the changed file applied at the tick", func() bool { return names() == "c" })
}
