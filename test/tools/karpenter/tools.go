//go:build tools

// Package tools pins the real Karpenter controller with its KWOK cloud
// provider, for the autoscaler tests. Its own module: in one module with
// another tool, minimal version selection would move Karpenter off the
// Kubernetes and controller-runtime versions it was released with.
package tools

import _ "sigs.k8s.io/karpenter/kwok"
