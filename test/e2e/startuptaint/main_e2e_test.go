//go:build e2e

// Package startuptaint tests the startup taint the webhook adds at Node
// creation, with the admission arguments and configuration of the rendered
// chart, against a real kube-apiserver that calls the real webhook binary.
package startuptaint

import (
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
