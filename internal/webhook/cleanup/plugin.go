// Package cleanup runs the plugins that clean up after a Node before its
// finalizer is removed: configuration (a YAML file, validated and
// hot-reloaded), ordering (`after`), parallelism, timeouts, critical versus
// optional failures, dry-run and the metrics every plugin gets for free.
// Plugins themselves live in internal/webhook/cleanup/plugins, one file each.
package cleanup

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// Plugin is one cleanup step. Cleanup must be idempotent: it runs again after
// any failure, after a restart and after a leader change. The Node handed to
// it carries metadata only (name, UID, labels, creation and deletion
// timestamps); it is a copy the plugin may keep.
type Plugin interface {
	// Name is the plugin's name in the configuration file.
	Name() string
	// ShouldRun reports whether the plugin applies to node at all.
	ShouldRun(node *corev1.Node) bool
	// Cleanup does the work, honouring ctx (it carries the plugin's timeout)
	// and DryRun(ctx).
	Cleanup(ctx context.Context, node *corev1.Node) error
}

// Skip, returned by Cleanup, says the plugin left the node's resources (or
// some of them) alone on purpose, because they are not the node's alone —
// like filepath.SkipDir, an error value that is not a failure. The attempt
// goes on as after a success (plugins after it run, the finalizer may go);
// the plugin's result is ResultSkipped with Reason, which the node's
// cleanup-status annotation, the metric and the attempt's Events show.
type Skip struct {
	// Reason says what was left alone and why.
	Reason string
}

func (s *Skip) Error() string {
	if s == nil {
		return "skipped"
	}
	return s.Reason
}

// leftAlone reports whether r is a plugin's own Skip, not a stage skipped
// because a critical plugin it runs after failed.
func (r PluginResult) leftAlone() bool {
	var s *Skip
	return r.Result == ResultSkipped && errors.As(r.Err, &s)
}

// Observer is implemented by plugins that want to hear how a node's whole
// cleanup attempt ended (the notify plugin sends success and failure
// messages). err is nil when the finalizer is about to be removed.
type Observer interface {
	Finished(ctx context.Context, node *corev1.Node, err error)
}

// Deps are what a plugin may use; a plugin keeps only what it needs.
type Deps struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// HTTP is for plugins that call external HTTP APIs.
	HTTP *http.Client
	// Log is already scoped to the plugin.
	Log *slog.Logger
	// SecretsDir is the directory secret files (tokens, URLs, auth headers)
	// must be in: the mounted Secret. A plugin refuses a secret file outside
	// it; empty refuses every secret file.
	SecretsDir string
	// Recorder records Events a plugin raises itself (nil: none).
	Recorder events.EventRecorder
	// Informers are the shared informers plugins scan instead of listing
	// from the API server (nil: none; the Loader makes them from Client).
	Informers *Informers
}

// Builtin is one row of the plugin table.
type Builtin struct {
	// Name is the plugin's key under `plugins:`.
	Name string
	// Defaults apply when the file does not mention the plugin, and fill the
	// generic keys it leaves out.
	Defaults Spec
	// New builds the plugin from its own keys (the generic ones removed), as
	// a JSON object; unknown keys and invalid values are errors that name the
	// key.
	New func(deps Deps, settings json.RawMessage) (Plugin, error)
}

// Spec is the part of a plugin's configuration the pipeline owns.
type Spec struct {
	// Enabled turns the plugin on.
	Enabled bool
	// Critical plugins block finalizer removal when they fail; optional ones
	// are logged, recorded as an Event and the pipeline continues.
	Critical bool
	// Timeout bounds one Cleanup call.
	Timeout time.Duration
	// After lists plugins that must have finished first.
	After []string
}

type runInfoKey struct{}

// RunInfo describes the attempt a Cleanup call belongs to.
type RunInfo struct {
	// DryRun: report what would be done, change nothing outside the process.
	DryRun bool
	// Attempt counts the node's cleanup attempts in this process, from 1.
	Attempt int
}

// WithRunInfo returns ctx carrying info.
func WithRunInfo(ctx context.Context, info RunInfo) context.Context {
	return context.WithValue(ctx, runInfoKey{}, info)
}

// Info returns the RunInfo of ctx (zero when there is none).
func Info(ctx context.Context) RunInfo {
	info, _ := ctx.Value(runInfoKey{}).(RunInfo)
	return info
}

// DryRun reports whether the current attempt is a dry run.
func DryRun(ctx context.Context) bool { return Info(ctx).DryRun }
