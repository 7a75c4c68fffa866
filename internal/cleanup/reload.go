package cleanup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Loader owns the running pipeline: it builds it from the configuration file
// at start and rebuilds it when the file changes. A file that does not parse
// or validate keeps the previous pipeline running; OnInvalid hears why.
type Loader struct {
	// Path is the YAML file; empty means the built-in defaults, never reloaded.
	Path string
	// Table is the plugin table.
	Table []Builtin
	// Deps are handed to every plugin.
	Deps Deps
	// DryRun forces dry-run whatever the file says.
	DryRun bool
	// Metrics are shared by every pipeline built.
	Metrics *Metrics
	// Log receives reload messages.
	Log *slog.Logger
	// OnInvalid is called (if set) when a changed file is rejected.
	OnInvalid func(err error)

	current atomic.Pointer[Pipeline]
	mu      sync.Mutex
	last    []byte // content last installed or rejected
	readErr string // last read failure reported, "" after a good read
	reloads *prometheus.CounterVec
}

// RegisterMetrics adds node_cleanup_config_reloads_total{result}.
func (l *Loader) RegisterMetrics(reg prometheus.Registerer) error {
	l.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "node_cleanup_config_reloads_total",
		Help: "Configuration file reloads by result (success, invalid).",
	}, []string{"result"})
	return reg.Register(l.reloads)
}

// Load reads, validates and installs the configuration; at start-up its
// error is fatal.
func (l *Loader) Load() error {
	data, err := l.read()
	if err != nil {
		return err
	}
	p, err := l.build(data)
	if err != nil {
		return err
	}
	l.install(p, data)
	return nil
}

// Pipeline is the pipeline to use for the next attempt.
func (l *Loader) Pipeline() *Pipeline { return l.current.Load() }

// Watch re-reads the file every interval until ctx ends. ConfigMap volumes
// swap a symlink, so content (not mtime) decides whether it changed.
func (l *Loader) Watch(ctx context.Context, interval time.Duration) {
	if l.Path == "" || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.Reload()
	}
}

// Reload applies the file if it changed since the last attempt.
func (l *Loader) Reload() {
	data, err := l.read()
	l.mu.Lock()
	// Report a bad file, or the same read failure, once rather than every tick.
	same := err == nil && bytes.Equal(data, l.last) || err != nil && err.Error() == l.readErr
	if err != nil {
		l.readErr = err.Error()
	} else {
		l.readErr = ""
	}
	l.mu.Unlock()
	if same {
		return
	}
	var p *Pipeline
	if err == nil {
		p, err = l.build(data)
	}
	if err != nil {
		if data != nil {
			l.mu.Lock()
			l.last = data
			l.mu.Unlock()
		}
		l.count("invalid")
		l.Log.Error("configuration reload failed; keeping the previous configuration", "path", l.Path, "error", err.Error())
		if l.OnInvalid != nil {
			l.OnInvalid(err)
		}
		return
	}
	l.install(p, data)
	l.count("success")
	l.Log.Info("configuration reloaded", "path", l.Path, "plugins", p.Names(), "dry_run", p.DryRun())
}

func (l *Loader) count(result string) {
	if l.reloads != nil {
		l.reloads.WithLabelValues(result).Inc()
	}
}

func (l *Loader) read() ([]byte, error) {
	if l.Path == "" {
		return []byte{}, nil
	}
	data, err := os.ReadFile(l.Path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return data, nil
}

func (l *Loader) build(data []byte) (*Pipeline, error) {
	cfg, perr := ParseConfig(data, l.Table)
	if cfg == nil {
		return nil, fmt.Errorf("%s: %w", l.describe(), perr)
	}
	p, berr := Build(cfg, l.Table, l.Deps, l.DryRun, l.Metrics)
	if err := errors.Join(perr, berr); err != nil {
		return nil, fmt.Errorf("%s: %w", l.describe(), err)
	}
	return p, nil
}

func (l *Loader) describe() string {
	if l.Path == "" {
		return "built-in configuration"
	}
	return l.Path
}

func (l *Loader) install(p *Pipeline, data []byte) {
	l.mu.Lock()
	l.last = data
	l.mu.Unlock()
	l.current.Store(p)
}
