package checks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// API proves the API server is reachable and that the agent is authenticated
// and authorized: a GET of its own node, served by the API server (not a
// cache), which fails with 401 or 403 where a mere TCP connect would pass.
type API struct {
	// Client is the agent's clientset.
	Client kubernetes.Interface
	// NodeName is the node the agent runs on.
	NodeName string
}

// Name implements Check.
func (*API) Name() string { return "api" }

// Run implements Check.
func (a *API) Run(ctx context.Context) error {
	_, err := a.Client.CoreV1().Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
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
