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
	"k8s.io/utils/clock"
)

// Loader owns the running pipeline: it builds it from the configuration file
// at start and rebuilds it when the file changes. A file that does not parse
// or validate keeps the previous pipeline running; with none (an invalid file
// at start) Pipeline is nil and node deletions are held until the file, or a
// Secret file it names, is fixed. OnInvalid hears why, once per new reason.
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
	// OnInvalid is called (if set) when the file is rejected for a new reason.
	OnInvalid func(err error)
	// Clock times Watch's re-reads; nil is the real clock.
	Clock clock.WithTicker

	current atomic.Pointer[Pipeline]
	mu      sync.Mutex
	last    []byte // content last installed or rejected
	invalid error  // why the file is not the one in use; nil when it is
	reloads *prometheus.CounterVec
	valid   prometheus.Gauge

	// informers makes Deps.Informers from Deps.Client when unset, once.
	informers sync.Once
}

// RegisterMetrics adds node_cleanup_config_reloads_total{result} and
// node_cleanup_config_valid.
func (l *Loader) RegisterMetrics(reg prometheus.Registerer) error {
	l.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "node_cleanup_config_reloads_total",
		Help: "Configuration file reloads by result (success, invalid).",
	}, []string{"result"})
	l.valid = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "node_cleanup_config_valid",
		Help: "1 when the cleanup configuration file is the one in use; 0 when it is invalid (the previous one runs, or with none node deletions are held).",
	})
	for _, c := range []prometheus.Collector{l.valid, l.reloads} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("cleanup: register configuration metrics: %w", err)
		}
	}
	return nil
}

// Load reads, validates and installs the configuration. An error leaves no
// pipeline (deletions are held) and is also what Err reports; Watch keeps
// trying, so a fixed file or Secret is picked up without a restart.
func (l *Loader) Load() error {
	data, err := l.read()
	var p *Pipeline
	if err == nil {
		p, err = l.build(data)
	}
	if err != nil {
		l.mu.Lock()
		l.invalid = err
		if data != nil {
			l.last = data
		}
		l.mu.Unlock()
		l.setValid(false)
		return err
	}
	l.install(p, data)
	return nil
}

// Pipeline is the pipeline to use for the next attempt; nil while no valid
// configuration was ever loaded.
func (l *Loader) Pipeline() *Pipeline { return l.current.Load() }

// Err is why the configuration file is not the one in use, nil when it is.
func (l *Loader) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.invalid
}

// Watch re-reads the file every interval until ctx ends. ConfigMap volumes
// swap a symlink, so content (not mtime) decides whether it changed. When
// ctx ends it stops the plugins' shared informers.
func (l *Loader) Watch(ctx context.Context, interval time.Duration) {
	defer func() { l.Deps.Informers.Stop() }()
	if l.Path == "" || interval <= 0 {
		<-ctx.Done()
		return
	}
	clk := l.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		l.Reload()
	}
}

// Reload applies the file if it changed since the last attempt, or if that
// attempt failed: a Secret file the configuration names may have appeared
// since, while the configuration itself is the same.
func (l *Loader) Reload() {
	data, err := l.read()
	var p *Pipeline
	if err == nil {
		l.mu.Lock()
		unchanged := l.invalid == nil && bytes.Equal(data, l.last)
		l.mu.Unlock()
		if unchanged {
			return
		}
		p, err = l.build(data)
	}
	if err != nil {
		l.reject(data, err)
		return
	}
	l.install(p, data)
	l.count("success")
	l.Log.Info("configuration reloaded", "path", l.Path, "plugins", p.Names(), "dry_run", p.DryRun())
}

// reject records a file (data nil: unreadable) that failed for err, and
// reports it once per reason rather than every tick.
func (l *Loader) reject(data []byte, err error) {
	l.mu.Lock()
	repeated := l.invalid != nil && l.invalid.Error() == err.Error()
	l.invalid = err
	if data != nil {
		l.last = data
	}
	l.mu.Unlock()
	l.setValid(false)
	if repeated {
		return
	}
	l.count("invalid")
	if l.Pipeline() == nil {
		l.Log.Error("configuration invalid; no cleanup configuration in use, node deletions are held until it is fixed", "path", l.Path, "error", err.Error())
	} else {
		l.Log.Error("configuration reload failed; keeping the previous configuration", "path", l.Path, "error", err.Error())
	}
	if l.OnInvalid != nil {
		l.OnInvalid(err)
	}
}

func (l *Loader) setValid(ok bool) {
	if l.valid == nil {
		return
	}
	if ok {
		l.valid.Set(1)
	} else {
		l.valid.Set(0)
	}
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
	// One set of informers for every pipeline this loader builds: a reload
	// keeps the watches the plugins opened.
	l.informers.Do(func() {
		if l.Deps.Informers == nil && l.Deps.Client != nil {
			l.Deps.Informers = NewInformers(l.Deps.Client)
		}
	})
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
	l.invalid = nil
	l.mu.Unlock()
	l.current.Store(p)
	l.setValid(true)
}
