//go:build e2e

// Package installkit is what the packages that install the chart with the
// real helm into a cluster of real nodes (kubelet, containerd, runc, CNI,
// kube-proxy) share: test/e2e/install (a node's way to verified, its gates,
// the network and DNS checks, a node deleted) and test/e2e/lifecycle (helm
// upgrade, remediation's replacement, helm uninstall). Each package starts
// a cluster of its own, so the two run side by side.
package installkit

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	// Release and Namespace are the helm release's.
	Release   = "kube-node-ready"
	Namespace = "kube-node-ready"
	// Finalizer, VerifiedLabel and SkipAnnotation are the names users see,
	// spelled out.
	Finalizer      = "infra.894.io/node-cleanup"
	VerifiedLabel  = "node-ready/verified"
	SkipAnnotation = "node-ready/skip-verification"
	// GateTimeout is the DaemonSet gate's timeout in these installs.
	GateTimeout = 20 * time.Second
)

// UnhealthyKey is the chart's default re-taint: the default preset's.
var UnhealthyKey = harness.UnhealthyTaint.Key

// Kit is one package's cluster of real nodes and the chart to install.
type Kit struct {
	C     *harness.Cluster
	Chart string
}

// Main is TestMain for a package of k: a cluster of real nodes with the
// project's images imported, shared by the package's tests.
func Main(m *testing.M, k *Kit) {
	harness.MainWithCluster(m, harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, ProjectImages: true}, func(_ context.Context, c *harness.Cluster) error {
		k.C = c
		var err error
		k.Chart, err = harness.ChartDir()
		return err
	})
}

// Values writes the chart values of every install here and returns the
// file: the locally built images and, so that re-taints and recoveries
// happen within a test, a short period.
func (k *Kit) Values(t *testing.T) string {
	t.Helper()
	v, err := k.C.LocalImageValues("checkPeriod: 2s\nnetwork: {peerRefresh: 10s}\ngates: {daemonSets: {timeout: "+GateTimeout.String()+"}}", "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Install runs helm install with vals and waits until every real node is
// verified.
func (k *Kit) Install(t *testing.T, vals string) {
	t.Helper()
	start := time.Now()
	k.C.HelmT(t, "install", Release, k.Chart, "--namespace", Namespace, "--create-namespace", "--values", vals, "--wait", "--timeout", "3m")
	t.Logf("helm install --wait took %s", time.Since(start).Round(time.Millisecond))
	harness.Eventually(t, 2*time.Minute, "real nodes verified", func() (bool, string) { return k.Verified(t, k.RealNodeNames()...) })
	t.Logf("every real node verified %s after helm install started", time.Since(start).Round(time.Millisecond))
}

// Tainted reports whether n carries the startup or the unhealthy taint.
func Tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == harness.StartupTaint.Key || t.Key == UnhealthyKey
	})
}

// RealNodeNames are the names of every real node started, deleted or not.
func (k *Kit) RealNodeNames() []string {
	var names []string
	for _, n := range k.C.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// LiveNodeNames are the real nodes that still exist.
func (k *Kit) LiveNodeNames(t *testing.T) []string {
	var names []string
	for _, n := range k.C.Nodes {
		if _, err := k.C.Client.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{}); err == nil {
			names = append(names, n.Name)
		}
	}
	return names
}

// Verified reports whether every named node is untainted and labelled
// verified, and which are not.
func (k *Kit) Verified(t *testing.T, names ...string) (bool, string) {
	var notYet []string
	for _, name := range names {
		n, err := k.C.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if Tainted(n) || n.Labels[VerifiedLabel] != "true" {
			notYet = append(notYet, fmt.Sprintf("%s (taints %v, label %q, condition: %s)", name, n.Spec.Taints, n.Labels[VerifiedLabel], Why(n)))
		}
	}
	return len(notYet) == 0, "not verified: " + strings.Join(notYet, ", ")
}

// Why is the agent's KubeNodeReady condition on n, as kubectl describe shows it.
func Why(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == "KubeNodeReady" {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "none"
}

// AgentPods maps node name to the Running agent pod on it.
func (k *Kit) AgentPods(t *testing.T) map[string]corev1.Pod {
	t.Helper()
	pods, err := k.C.Client.CoreV1().Pods(Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app=kube-node-ready"})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			m[p.Spec.NodeName] = p
		}
	}
	return m
}

// Steps runs steps one after another as subtests of t; a failed step
// ends the test, since later steps build on it.
func Steps(t *testing.T, steps []Step) {
	for _, s := range steps {
		if !t.Run(s.Name, s.Run) {
			t.Fatalf("step %s failed; later steps build on it", s.Name)
		}
	}
}

// Step is one subtest of Steps.
type Step struct {
	Name string
	Run  func(t *testing.T)
}
