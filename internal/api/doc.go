// Package api is kube-node-ready's shared vocabulary: the names of the
// taints, label, annotations, finalizer and condition the agent and the
// webhook put on Nodes, the condition's reasons, and the wire formats other
// components read back (the condition message, the cleanup-status
// document). The agent, the webhook, remediation and the kubectl plugin all
// take them from here; it plays the role api/v1alpha1 plays in a
// controller with CRDs.
//
// It depends on the standard library only, so any binary can import it
// without the agent's or the webhook's dependencies.
package api
