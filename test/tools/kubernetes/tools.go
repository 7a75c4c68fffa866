//go:build tools

// Package tools pins the Kubernetes control-plane binaries the tests run against.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
