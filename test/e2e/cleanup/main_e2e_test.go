//go:build e2e

// Package cleanup tests node cleanup end to end: two real
// kube-node-ready-webhook processes (leader-elected, least-privilege RBAC as
// docs/cleanup-plugins.md documents it) against a real kube-apiserver, real kubectl, and
// loopback HTTP servers that speak the Portworx and chat formats.
package cleanup

import (
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	ipA        = "10.213.0.20" // webhook replica A (admission goes here)
	ipB        = "10.213.0.21" // webhook replica B
	pxAddr     = "10.213.0.30:9001"
	chatAddr   = "10.213.0.31:8080"
	ns         = "knr-system"
	mwc        = harness.WebhookConfigName
	fin        = harness.Finalizer
	skipAnnot  = "infra.894.io/skip-cleanup"
	optedClass = "local-e2e"
)

type env struct {
	cp         *harness.ControlPlane
	dir        string
	configPath string
	px         *portworx
	chat       *chat
	procs      []*harness.Daemon
	tokenFile  string
	urlFile    string
}
