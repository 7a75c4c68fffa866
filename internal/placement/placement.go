// Package placement says whether a DaemonSet's pod will run on a node, as the
// DaemonSet controller decides it: one matcher for the agent's DaemonSet gate
// and the webhook's startup taint, built on k8s.io/component-helpers.
package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// daemonPodTolerations are the tolerations the DaemonSet controller adds to
// every DaemonSet pod, so they count when deciding where one will run.
var daemonPodTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// DaemonPodRunsOn reports whether a DaemonSet whose pod template has spec
// places a pod on node: node name, node selector, required node affinity,
// NoSchedule and NoExecute taints against its tolerations (with those the
// DaemonSet controller adds), the taints whose keys are in ignore left out.
func DaemonPodRunsOn(spec *corev1.PodSpec, node *corev1.Node, ignore []string) bool {
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false
	}
	pod := &corev1.Pod{Spec: *spec}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, DaemonPodTolerations(spec), func(t *corev1.Taint) bool {
		return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !slices.Contains(ignore, t.Key)
	}, false)
	return !untolerated
}

// DaemonPodTolerations are spec's tolerations with those the DaemonSet
// controller adds to every DaemonSet pod.
func DaemonPodTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	tolerations := append(slices.Clone(spec.Tolerations), daemonPodTolerations...)
	if spec.HostNetwork {
		tolerations = append(tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return tolerations
}

// Tolerates reports whether a DaemonSet pod of spec tolerates taint.
func Tolerates(spec *corev1.PodSpec, taint corev1.Taint) bool {
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), DaemonPodTolerations(spec), &taint, false)
}
