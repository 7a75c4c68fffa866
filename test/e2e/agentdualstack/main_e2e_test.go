//go:build e2e

// Package agentdualstack_test runs the real agent binary, one process per
// simulated node, on a dual-stack control plane of the test harness whose
// primary family is IPv6: the kubernetes Service has an IPv6 ClusterIP
// only, kube-dns one per family, and every node an address per family.
package agentdualstack_test

import (
	"log"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/agentkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var kit agentkit.Kit

func TestMain(m *testing.M) {
	agentkit.Main(m, harness.Options{IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, Logf: log.Printf}, &kit)
}
