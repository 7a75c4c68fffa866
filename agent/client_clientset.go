//go:build clientset

package main

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
)

// apiClient is the agent's access to the API server.
type apiClient = Clientset

func newAPIClient(cfg *rest.Config) (apiClient, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	return Clientset{CS: cs}, err
}

// startRecorder starts client-go's Event broadcaster, as the webhook does
// (reportingInstance is the controller and host name there). stop shuts it
// down; Events still being written are abandoned.
func startRecorder(ctx context.Context, client apiClient, _ string, _ *slog.Logger) (r agent.Recorder, stop func(context.Context), err error) {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.CS.EventsV1()})
	// The writes outlive ctx until stop, as the default build's do.
	recCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := b.StartRecordingToSinkWithContext(recCtx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("start event recording: %w", err)
	}
	return EventRecorder{Recorder: b.NewRecorder(scheme.Scheme, name)}, func(context.Context) { b.Shutdown(); cancel() }, nil
}
