//go:build tools

// Package tools pins kube-network-policies, SIG Network's reference
// NetworkPolicy enforcer, which the real-node harness runs on each node
// (ClusterOptions.NetworkPolicies) so the chart's policies are enforced for
// real. Its own module, so its dependencies never move another tool's.
package tools

import _ "sigs.k8s.io/kube-network-policies/cmd"
