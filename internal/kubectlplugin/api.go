package kubectlplugin

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
)

// API is what the commands need from the API server. Its errors already
// say what failed in a person's words: "node X not found", "not allowed to
// patch nodes ...".
type API interface {
	// GetNode reads one Node.
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	// ListNodes reads the Nodes matching a label selector ("" for all).
	ListNodes(ctx context.Context, selector string) ([]corev1.Node, error)
	// PatchNode applies a JSON merge patch to a Node's metadata.
	PatchNode(ctx context.Context, name string, patch []byte) error
	// ListNodeEvents reads the events.k8s.io/v1 Events about the Node name
	// in namespace ("" for all namespaces).
	ListNodeEvents(ctx context.Context, namespace, name string) ([]eventsv1.Event, error)
	// Cluster is what doctor reads: DaemonSets, Deployments and their
	// revisions, NodePools, NodeReadinessRules, Pod Events.
	doctor.Cluster
}

// listChunk is the page size of lists, as kubectl's.
const listChunk = 500

// kubeAPI is API on a clientset.
type kubeAPI struct {
	client kubernetes.Interface
}

// NewAPI is API on a clientset.
func NewAPI(client kubernetes.Interface) API { return &kubeAPI{client: client} }

func (a *kubeAPI) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := a.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, explain(err, "get", "nodes", name)
	}
	return n, nil
}

func (a *kubeAPI) ListNodes(ctx context.Context, selector string) ([]corev1.Node, error) {
	nodes, err := listPages(ctx, metav1.ListOptions{LabelSelector: selector}, func(ctx context.Context, opts metav1.ListOptions) ([]corev1.Node, string, error) {
		l, err := a.client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	return nodes, explain(err, "list", "nodes", "")
}

// listPages reads a list in pages of listChunk, as kubectl does; list reads
// one page and returns its items and continue token.
func listPages[T any](ctx context.Context, opts metav1.ListOptions, list func(context.Context, metav1.ListOptions) ([]T, string, error)) ([]T, error) {
	opts.Limit = listChunk
	var out []T
	for {
		items, cont, err := list(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if cont == "" {
			return out, nil
		}
		opts.Continue = cont
	}
}

func (a *kubeAPI) PatchNode(ctx context.Context, name string, patch []byte) error {
	_, err := a.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerKubectlPlugin})
	return explain(err, "patch", "nodes", name)
}

func (a *kubeAPI) ListNodeEvents(ctx context.Context, namespace, name string) ([]eventsv1.Event, error) {
	opts := metav1.ListOptions{FieldSelector: fields.Set{"regarding.kind": "Node", "regarding.name": name}.String()}
	events, err := listPages(ctx, opts, func(ctx context.Context, opts metav1.ListOptions) ([]eventsv1.Event, string, error) {
		l, err := a.client.EventsV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	return events, explain(err, "list", "events.events.k8s.io", "")
}

func (a *kubeAPI) ListPodEvents(ctx context.Context, namespace string) ([]eventsv1.Event, error) {
	opts := metav1.ListOptions{FieldSelector: fields.Set{"regarding.kind": "Pod"}.String()}
	events, err := listPages(ctx, opts, func(ctx context.Context, opts metav1.ListOptions) ([]eventsv1.Event, string, error) {
		l, err := a.client.EventsV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	return events, explain(err, "list", "events.events.k8s.io"+scope(namespace), "")
}

// apiError is an API error in a person's words; errors.As still finds the
// API server's status in it (apierrors.IsForbidden and the like work).
type apiError struct {
	msg string
	err error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

// explain puts an API error in a person's words: which node is missing,
// which verb on which resource RBAC refused, or that the credentials did
// not authenticate. nil stays nil.
func explain(err error, verb, resource, name string) error {
	if err == nil {
		return nil
	}
	what := resource
	if name != "" {
		what = resource + " " + name
	}
	msg := fmt.Sprintf("%s %s: %v", verb, what, err)
	switch {
	case apierrors.IsNotFound(err) && resource == "nodes" && name != "":
		msg = fmt.Sprintf("node %s not found", name)
	case apierrors.IsForbidden(err):
		msg = fmt.Sprintf("not allowed to %s %s: %s", verb, what, apiMessage(err))
	case apierrors.IsUnauthorized(err):
		msg = fmt.Sprintf("not authenticated to the API server (%s %s): check the credentials of the kubeconfig context: %s", verb, what, apiMessage(err))
	}
	return &apiError{msg: msg, err: err}
}

// apiMessage is the API server's own message of a status error.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}
