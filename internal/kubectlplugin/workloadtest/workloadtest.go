// Package workloadtest builds, for the plugin's tests and its doctor's,
// kube-node-ready's workloads as the chart deploys them, and a Cluster
// Autoscaler's beside them.
package workloadtest

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespace is where the chart is installed in these tests.
const Namespace = "kube-node-ready"

// Taints of the cluster-autoscaler preset, in the agent's flag syntax.
const (
	CAStartupTaint = "startup-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule"
	CAStatusTaint  = "status-taint.cluster-autoscaler.kubernetes.io/node-ready=true:NoSchedule"
)

// chartLabels are the labels the chart puts on its workloads (release
// kube-node-ready, chart version 0.1.0).
func chartLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "kube-node-ready", "app.kubernetes.io/instance": "kube-node-ready",
		"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "kube-node-ready-0.1.0", "app.kubernetes.io/version": "0.1.0"}
}

// AgentDaemonSet is the chart's agent DaemonSet with the taint flags given.
func AgentDaemonSet(startup, unhealthy string) appsv1.DaemonSet {
	return appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "kube-node-ready", Labels: chartLabels()},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "kube-node-ready"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "ghcr.io/kube-node-ready/kube-node-ready-agent:v1",
				Args: []string{"--startup-taint=" + startup, "--unhealthy-taint=" + unhealthy, "--verified-label=node-ready/verified"}}}},
		}},
	}
}

// WebhookDeployment is the chart's webhook Deployment, running, with args.
func WebhookDeployment(args ...string) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "kube-node-ready-webhook", Labels: chartLabels()},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "kube-node-ready-webhook"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "webhook", Image: "ghcr.io/kube-node-ready/kube-node-ready-webhook:v1",
				Args: append([]string{"--listen-address=:8443"}, args...)}}},
		}},
		// Running: it removes the finalizer (doctor's held finalizers).
		Status: appsv1.DeploymentStatus{ReadyReplicas: 1},
	}
}

// ClusterAutoscalerDeployment is a Cluster Autoscaler Deployment as its
// chart writes it: the program and its flags in command.
func ClusterAutoscalerDeployment(flags ...string) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "aws-cluster-autoscaler", Image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.0",
				Command: append([]string{"./cluster-autoscaler", "--cloud-provider=aws", "--v=4"}, flags...)}}},
		}},
	}
}
