//go:build e2e

// Package install_test installs the chart with the real helm into a cluster
// of real nodes (kubelet, containerd, runc, CNI, kube-proxy) and checks what a
// user sees: nothing but the chart runs the component under test, from the
// images `make images` built. Its steps follow a node's way to verified, the
// DaemonSet and CSI drivers gates on joining nodes, the network and DNS
// checks, the own-node policy and a node's deletion; test/e2e/lifecycle,
// on a cluster of its own, upgrades, replaces and uninstalls.
package install_test

import (
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/e2e/installkit"
)

var kit installkit.Kit

func TestMain(m *testing.M) { installkit.Main(m, &kit) }
