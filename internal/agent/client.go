package agent

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
)

// NodeClient is what the agent does with Nodes: watch and patch its own,
// count the re-tainted ones.
type NodeClient interface {
	ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	WatchNodes(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	PatchNode(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Node, error)
	PatchNodeStatus(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*corev1.Node, error)
}

// LeaseClient reads and writes the Lease that serializes re-taints.
type LeaseClient interface {
	GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
	UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
}

// ServerClient tells whether the API server serves.
type ServerClient interface {
	ServerVersion(ctx context.Context) (*version.Info, error)
	Readyz(ctx context.Context) error
}

// ConnectionCloser is a Client that can drop its dead connections to the
// API server, so that the next request dials anew (Clientset can), and says
// how many it dropped. The agent does when the API server stops answering;
// a Client without it keeps its connections.
type ConnectionCloser interface {
	DropStalledConnections() int
}

// Client is the agent's access to the API server; Clientset implements it.
type Client interface {
	NodeClient
	LeaseClient
	ServerClient
}

// Recorder records Events about the node; EventRecorder implements it.
type Recorder interface {
	Eventf(ref corev1.ObjectReference, eventType, reason, action, format string, args ...any)
}
