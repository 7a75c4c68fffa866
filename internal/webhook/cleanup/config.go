package cleanup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is a parsed, validated configuration file.
type Config struct {
	// DryRun makes every plugin report instead of act; finalizers are still removed.
	DryRun bool
	// Plugins holds every known plugin's settings, enabled or not, by name.
	Plugins map[string]PluginConfig
}

// PluginConfig is one plugin's settings.
type PluginConfig struct {
	Spec
	// Settings are the plugin's own keys as a JSON object.
	Settings json.RawMessage
}

// file is the top level of the YAML file.
type file struct {
	DryRun  bool                                  `json:"dryRun"`
	Plugins map[string]map[string]json.RawMessage `json:"plugins"`
}

// parseFile reads the top level with exact key names (encoding/json alone
// would accept `dryrun` for `dryRun`).
func parseFile(data []byte) (file, error) {
	var f file
	if len(bytes.TrimSpace(data)) == 0 {
		return f, nil
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return f, fmt.Errorf("config: not valid YAML: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return f, fmt.Errorf("config: the top level must be a mapping with dryRun and plugins: %w", err)
	}
	var errs []error
	for _, k := range sortedKeys(top) {
		v := top[k]
		switch k {
		case "dryRun":
			if err := json.Unmarshal(v, &f.DryRun); err != nil {
				errs = append(errs, fmt.Errorf("dryRun: want true or false, got %s", v))
			}
		case "plugins":
			if err := json.Unmarshal(v, &f.Plugins); err != nil {
				errs = append(errs, fmt.Errorf("plugins: want a mapping of plugin name to settings: %w", err))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: unknown field (known: dryRun, plugins)", k))
		}
	}
	return f, errors.Join(errs...)
}

// Generic keys every plugin section may carry; the rest go to the plugin.
var genericKeys = []string{"enabled", "critical", "timeout", "after"}

// ParseConfig parses and validates a configuration file against the plugin
// table. Every error names the field (`plugins.portworx.timeout: ...`).
// Empty input is the defaults. With an error, the returned Config (nil when
// the file is not even YAML) holds what could be read.
func ParseConfig(data []byte, table []Builtin) (*Config, error) {
	f, err := parseFile(data)
	if err != nil && f.Plugins == nil {
		return nil, err
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	known := map[string]Builtin{}
	for _, b := range table {
		known[b.Name] = b
	}
	cfg := &Config{DryRun: f.DryRun, Plugins: map[string]PluginConfig{}}
	for _, b := range table {
		cfg.Plugins[b.Name] = PluginConfig{Spec: b.Defaults, Settings: json.RawMessage("{}")}
	}
	for _, name := range sortedKeys(f.Plugins) {
		if _, ok := known[name]; !ok {
			errs = append(errs, fmt.Errorf("plugins.%s: unknown plugin (known: %s)", name, strings.Join(names(table), ", ")))
			continue
		}
		pc, err := parsePlugin(name, f.Plugins[name], known[name].Defaults)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.Plugins[name] = pc
	}
	for _, name := range sortedKeys(cfg.Plugins) {
		for _, dep := range cfg.Plugins[name].After {
			switch _, ok := known[dep]; {
			case dep == name:
				errs = append(errs, fmt.Errorf("plugins.%s.after: a plugin cannot run after itself", name))
			case !ok:
				errs = append(errs, fmt.Errorf("plugins.%s.after: unknown plugin %q", name, dep))
			}
		}
	}
	if len(errs) == 0 {
		if cycle := findCycle(cfg.Plugins); cycle != nil {
			errs = append(errs, fmt.Errorf("plugins: ordering cycle %s", strings.Join(cycle, " → ")))
		}
	}
	// The configuration is returned even with errors, so that Build can
	// report the plugins' own errors in the same pass.
	return cfg, errors.Join(errs...)
}

// parsePlugin splits a plugin section into the generic keys and its own.
// A section that is present but says nothing about `enabled` enables the plugin.
func parsePlugin(name string, raw map[string]json.RawMessage, defaults Spec) (PluginConfig, error) {
	pc := PluginConfig{Spec: defaults}
	pc.Enabled = true
	pc.After = slices.Clone(defaults.After)
	field := func(key string) string { return "plugins." + name + "." + key }
	var errs []error
	if v, ok := raw["enabled"]; ok {
		if err := json.Unmarshal(v, &pc.Enabled); err != nil {
			errs = append(errs, fmt.Errorf("%s: want true or false, got %s", field("enabled"), v))
		}
	}
	if v, ok := raw["critical"]; ok {
		if err := json.Unmarshal(v, &pc.Critical); err != nil {
			errs = append(errs, fmt.Errorf("%s: want true or false, got %s", field("critical"), v))
		}
	}
	if v, ok := raw["timeout"]; ok {
		var s string
		d, err := time.Duration(0), json.Unmarshal(v, &s)
		if err == nil {
			d, err = time.ParseDuration(s)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: want a duration like 30s or 2m, got %s", field("timeout"), v))
		case d <= 0 || d > time.Hour:
			errs = append(errs, fmt.Errorf("%s: %s is not between 0 and 1h", field("timeout"), d))
		default:
			pc.Timeout = d
		}
	}
	if v, ok := raw["after"]; ok {
		pc.After = nil
		if err := json.Unmarshal(v, &pc.After); err != nil {
			errs = append(errs, fmt.Errorf("%s: want a list of plugin names, got %s", field("after"), v))
		}
	}
	own := map[string]json.RawMessage{}
	for k, v := range raw {
		if !slices.Contains(genericKeys, k) {
			own[k] = v
		}
	}
	pc.Settings, _ = json.Marshal(own)
	return pc, errors.Join(errs...)
}

// findCycle returns one ordering cycle (first name repeated at the end), or nil.
func findCycle(plugins map[string]PluginConfig) []string {
	const (
		unvisited = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(n string) []string {
		state[n] = onPath
		path = append(path, n)
		for _, dep := range plugins[n].After {
			switch state[dep] {
			case onPath:
				i := slices.Index(path, dep)
				return append(slices.Clone(path[i:]), dep)
			case unvisited:
				if c := visit(dep); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, n := range sortedKeys(plugins) {
		if state[n] == unvisited {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

// DecodeSettings strictly decodes a plugin's own keys into v; errors name the
// key as `<plugin>.<key>` (the config adds the `plugins.` prefix).
func DecodeSettings(plugin string, settings json.RawMessage, v any) error {
	if len(settings) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(settings))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute):
			return fmt.Errorf("%s.%s: want %s, got %s", plugin, ute.Field, ute.Type, ute.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return fmt.Errorf("%s.%s: unknown key", plugin, strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`))
		}
		return fmt.Errorf("%s: %w", plugin, err)
	}
	return nil
}

func names(table []Builtin) []string {
	out := make([]string, 0, len(table))
	for _, b := range table {
		out = append(out, b.Name)
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
