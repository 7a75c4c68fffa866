//go:build tools

// Package tools pins the container runtime that real test nodes run: containerd,
// its runc shim and the ctr client used to import the project's images.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
