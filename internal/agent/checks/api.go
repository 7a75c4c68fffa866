package checks

import (
	"context"
	"flag"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// NodeGetter reads a Node from the API server's watch cache.
type NodeGetter interface {
	GetNodeCached(ctx context.Context, name string) (*corev1.Node, error)
}

// API proves the API server is reachable and that the agent is authenticated
// and authorized: a GET of its own node, which fails with 401 or 403 where a
// mere TCP connect would pass. It is served from the API server's watch
// cache (resourceVersion=0): authentication and authorization are the same,
// and a fleet of agents checking every minute costs etcd nothing.
type API struct {
	// Client reads the node.
	Client NodeGetter
	// NodeName is the node the agent runs on.
	NodeName string
}

// Name implements Check.
func (*API) Name() string { return "api" }

// Run implements Check.
func (a *API) Run(ctx context.Context) error {
	_, err := a.Client.GetNodeCached(ctx, a.NodeName)
	switch {
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("api: not authenticated (token rejected by the API server): %w", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("api: authenticated but not authorized to get node %s (check the agent's RBAC): %w", a.NodeName, err)
	case apierrors.IsNotFound(err):
		// Reachable and authorized; the node object itself is gone.
		return fmt.Errorf("api: node %s not found: %w", a.NodeName, err)
	default:
		return fmt.Errorf("api: get node %s: %w", a.NodeName, err)
	}
}

// APIConfig configures the api check, which has no settings of its own.
type APIConfig struct{}

// AddFlags implements Config.
func (APIConfig) AddFlags(*flag.FlagSet) {}

// Validate implements Config.
func (APIConfig) Validate(bool) []error { return nil }

// Build implements Config.
func (APIConfig) Build(d Deps) Check { return &API{Client: d.Client, NodeName: d.NodeName} }
