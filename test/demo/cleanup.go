package main

import "github.com/kube-node-ready/kube-node-ready/test/harness"

// cleanupArgs configures the cleanup side of the webhook for the demo.
func cleanupArgs(*harness.ControlPlane) []string { return nil }
