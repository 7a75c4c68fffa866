//go:build !clientset

package main

import (
	"context"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/kube"
)

// The default build talks to the API server through internal/kube; the
// clientset build tag selects client-go's generated clientset and
// tools/events instead, so both can be measured side by side
// (docs/benchmarks.md).

// apiClient is the agent's access to the API server.
type apiClient = *kube.Client

func newAPIClient(cfg *rest.Config) (apiClient, error) { return kube.New(cfg) }

// startRecorder starts the Event recorder; stop writes what it still holds
// within its context's deadline.
func startRecorder(ctx context.Context, client apiClient, instance string, log *slog.Logger) (r agent.Recorder, stop func(context.Context), err error) {
	rec := &kube.Recorder{Client: client, Controller: name, Instance: instance, Log: log}
	// The worker outlives ctx: stop drains it on the way out.
	go rec.Run(context.WithoutCancel(ctx))
	return rec, rec.Close, nil
}
