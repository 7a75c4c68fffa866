//go:build tools

// Package tools pins KWOK, which keeps the simulated Nodes of the autoscaler
// and fleet-scale tests Ready and heart-beating against the harness's API
// server. Its own module, so its dependencies never move another tool's.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
