package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
)

// Client is the agent's access to the API server: client-go's clientset for
// the objects (its node, the re-taint Lease, the fleet count), and the
// API server itself for what no typed client asks.
type Client struct {
	// Kube reads and writes the agent's objects.
	Kube kubernetes.Interface
	// Server answers /readyz and /version and drops stalled connections.
	Server Server
}

// Server is what the agent asks of the API server rather than of an
// object; Clientset implements it.
type Server interface {
	// Readyz is nil when the API server answers 200 on /readyz.
	Readyz(ctx context.Context) error
	// ServerVersion reads /version: whether the API server answers at all.
	ServerVersion(ctx context.Context) (*version.Info, error)
	// DropStalledConnections drops the connections to the API server that
	// its host stopped acknowledging, so that the next request dials anew,
	// and says how many it dropped. The agent does when the API server
	// stops answering.
	DropStalledConnections() int
}

// Recorder records Events about the node; EventRecorder implements it.
type Recorder interface {
	Eventf(ref corev1.ObjectReference, eventType, reason, action, format string, args ...any)
}
