package gates

import (
	"context"
	"log/slog"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// daemonSetWatch keeps the DaemonSets of the cluster and the pods on this
// node in caches for the DaemonSet gate: one field-selected watch of pods
// and one watch of DaemonSets, trimmed to what the gate reads. It runs only
// while the gate is needed (a bootstrap gate stops it once the node is
// verified), so a node in service pays nothing for it.
type daemonSetWatch struct {
	pods, ds *fieldWatch
}

// newDaemonSetWatch returns the watches of what the gate on nodeName reads;
// changed is called on every change, from the informers' goroutines; their
// refusals are logged on log.
func newDaemonSetWatch(kube kubernetes.Interface, nodeName string, changed func(), log *slog.Logger) *daemonSetWatch {
	return &daemonSetWatch{
		pods: &fieldWatch{
			log:      log,
			selector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
			example:  &corev1.Pod{},
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return kube.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
			},
			changed: changed,
			trim:    trimForGate,
		},
		ds: &fieldWatch{
			log:     log,
			example: &appsv1.DaemonSet{},
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, o)
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return kube.AppsV1().DaemonSets(metav1.NamespaceAll).Watch(ctx, o)
			},
			changed: changed,
			trim:    trimForGate,
		},
	}
}

// start runs the watches unless they already run.
func (w *daemonSetWatch) start(ctx context.Context) {
	w.pods.start(ctx)
	w.ds.start(ctx)
}

// stop ends the watches and drops the caches.
func (w *daemonSetWatch) stop() {
	w.pods.stop()
	w.ds.stop()
}

// DaemonSets implements DaemonSetSource.
func (w *daemonSetWatch) DaemonSets() []*appsv1.DaemonSet {
	return listOf[*appsv1.DaemonSet](w.ds.objects())
}

// PodsOnNode implements DaemonSetSource.
func (w *daemonSetWatch) PodsOnNode() []*corev1.Pod { return listOf[*corev1.Pod](w.pods.objects()) }

// Synced implements DaemonSetSource.
func (w *daemonSetWatch) Synced() bool { return w.pods.synced() && w.ds.synced() }

func listOf[T any](objs []any) []T {
	var out []T
	for _, obj := range objs {
		if t, ok := obj.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// trimForGate keeps only what the gate reads, so a cluster with many large
// DaemonSets costs the agent little memory on every node.
func trimForGate(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.DaemonSet:
		spec := o.Spec.Template.Spec
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, UID: o.UID, Labels: o.Labels, ResourceVersion: o.ResourceVersion},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeName: spec.NodeName, NodeSelector: spec.NodeSelector, Affinity: spec.Affinity,
				Tolerations: spec.Tolerations, HostNetwork: spec.HostNetwork,
			}}},
		}, nil
	case *corev1.Pod:
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion,
				OwnerReferences: o.OwnerReferences, DeletionTimestamp: o.DeletionTimestamp,
			},
			Status: corev1.PodStatus{Conditions: o.Status.Conditions},
		}, nil
	}
	return obj, nil
}
