//go:build e2e

// Package remediation tests the webhook's replacement of nodes that never
// verify against a real kube-apiserver, with Karpenter's real NodeClaim CRD
// (from its pinned Go module) where NodeClaims are involved, and the
// webhook's permissions from the rendered chart.
package remediation

import (
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	ns       = "kube-node-ready"
	deadline = 3 * time.Second
)

type env struct {
	cp  *harness.ControlPlane
	dyn dynamic.Interface
	w   *harness.Daemon
}
