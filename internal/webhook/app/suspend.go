package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// startSuspend follows the operator's suspend switch (--suspend-configmap)
// on every replica: admission reads it on each, remediation on the leader.
// node_ready_suspended is exported either way; without API access (an
// admission-only replica in files mode) there is no switch, and nil is
// never suspended.
func startSuspend(ctx context.Context, wg *sync.WaitGroup, opts Options, cfg *rest.Config, reg prometheus.Registerer, log *slog.Logger) (*suspend.Switch, error) {
	gauge := suspend.NewGauge()
	if err := reg.Register(gauge); err != nil {
		return nil, fmt.Errorf("suspend: register metrics: %w", err)
	}
	if cfg == nil || opts.SuspendConfigMap == "" {
		return nil, nil
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("suspend: client: %w", err)
	}
	sw := suspend.New(client, opts.Namespace, opts.SuspendConfigMap, gauge, log.With("component", "suspend"))
	wg.Go(func() { sw.Run(ctx) })
	return sw, nil
}
