package plugins

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// LogName is the log plugin's name.
const LogName = "log"

// logPlugin writes one structured line per node: the record of what left.
type logPlugin struct{ log *slog.Logger }

type logSettings struct{}

func newLog(deps cleanup.Deps, settings json.RawMessage) (cleanup.Plugin, error) {
	var s logSettings
	if err := cleanup.DecodeSettings(LogName, settings, &s); err != nil {
		return nil, err
	}
	return &logPlugin{log: deps.Log}, nil
}

func (p *logPlugin) Name() string { return LogName }

func (p *logPlugin) ShouldRun(*corev1.Node) bool { return true }

func (p *logPlugin) Cleanup(ctx context.Context, node *corev1.Node) error {
	end := time.Now()
	if node.DeletionTimestamp != nil {
		end = node.DeletionTimestamp.Time
	}
	p.log.InfoContext(ctx, "node deleted",
		"node", node.Name,
		"uid", string(node.UID),
		"labels", node.Labels,
		"created", node.CreationTimestamp.UTC().Format(time.RFC3339),
		"age_seconds", end.Sub(node.CreationTimestamp.Time).Seconds(),
		"dry_run", cleanup.DryRun(ctx))
	return nil
}
