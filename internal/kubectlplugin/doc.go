// Package kubectlplugin is `kubectl node-ready`: what kube-node-ready did to
// each node and why, read from the marks the agent and the webhook leave on
// Nodes (taints, label, the KubeNodeReady condition, the cleanup status
// annotation, Events), and the two bypass annotations set and removed. The
// names and wire formats of those marks come from internal/api.
//
// Reading a node into what the commands show (report.go, cleanup.go,
// condition.go, events.go) and printing it (print.go) are pure functions;
// go is the only place that talks to the API server, behind API.
package kubectlplugin
