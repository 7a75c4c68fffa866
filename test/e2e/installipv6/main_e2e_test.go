//go:build e2e

// Package installipv6_test installs the chart with the real helm on real
// nodes in IPv6 single-stack and in dual-stack, one cluster per family (each
// test starts its own, so the package has no shared cluster), and checks
// that a user of such a cluster needs to set nothing: every agent verifies
// its node, a joining node gets the finalizer and is verified, a deleted
// node's cleanup runs before its finalizer goes, and uninstall leaves no
// finalizer.
package installipv6_test

import (
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
