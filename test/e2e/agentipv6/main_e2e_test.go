//go:build e2e

// Package agentipv6_test runs the real agent binary, one process per
// simulated node, on an IPv6 single-stack control plane of the test harness
// (Service CIDR, kube-dns, CoreDNS, the API server and the nodes in IPv6
// only), with the scenarios of test/e2e/agentkit the IPv4 package runs too.
package agentipv6_test

import (
	"log"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/agentkit"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var kit agentkit.Kit

func TestMain(m *testing.M) {
	agentkit.Main(m, harness.Options{IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}, Logf: log.Printf}, &kit)
}
