// Package doctor is what `kubectl node-ready doctor` concludes: how Cluster
// Autoscaler and Karpenter treat a node carrying one of kube-node-ready's
// taints, what goes wrong when they treat it as something it is not, and
// the fixes. Only doctor uses these rules.
//
// The rules are the autoscalers' own, as their code and documentation state
// them (Cluster Autoscaler's utils/taints/taints.go and FAQ; Karpenter
// v1.14's pkg/scheduling/taints.go and pkg/controllers/state/statenode.go):
//
//   - Cluster Autoscaler sorts a taint into startup (the node still starts:
//     counted as upcoming, no second scale-up), status (Ready but unusable:
//     its capacity is replaced) or unknown (counted as usable capacity the
//     pending pods do not fit on: over-scale, and template poisoning once a
//     tainted node becomes its group's template).
//   - Karpenter ignores, until a node is initialized, its NodePool's
//     startupTaints and, from core v1.13.0, the keys under
//     readiness.k8s.io/; every other taint is permanent, so a held node
//     makes it launch more. Which release runs is read from its Deployment;
//     when none shows it, the older rule is taken.
//
// The rules are pure (classes.go, diagnose.go, fixes.go). Around them is
// the command's reading and printing: Examine reads, through Cluster, our
// DaemonSets and Deployments (read.go), the autoscalers' Deployments and
// Karpenter's NodePools, the nodes (stranded taints, held finalizers),
// NodeReadinessRules and the webhook's Events about external names, and
// hands their flags and fields to Diagnose; Print writes the Report. The
// plugin (internal/kubectlplugin) wires the command and finds our
// workloads for its other commands with this package's IsOurs and Setting.
package doctor
