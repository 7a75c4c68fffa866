package agent

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Observe mode with --reverify-after-reboot: a verified node whose boot ID
// differs from the one it was verified under is one enforce would hold with
// the startup taint until every check and gate passes again (reboot.go).
// Observe records that hold as it records a new node's: the condition says
// WouldHoldAfterReboot, a Warning Event and the "hold" operation of
// node_ready_would_taint_operations_total mark its start, the bootstrap set
// runs, and the round that passes records for how long enforce would have
// held the node and the new boot ID. Like observe's
// would-be re-taint, it is not weighed against the fleet budget, the
// re-taint Lease or the suspend switch: observe writes nothing those gate.

// observeReboot notes, in observe mode, that enforce would hold node after
// a reboot. node is as the step sees it, taints of ours already gone.
func (a *Agent) observeReboot(node *corev1.Node) {
	if !a.cfg.ReverifyAfterReboot || a.would.state != "" || a.bypassed(node) || !a.rebootedOn(node) {
		return
	}
	a.setWould(api.ReasonWouldHold, a.clock.Now())
	a.would.reboot = true
	a.metrics.observe.actions.WithLabelValues("hold").Inc()
	a.log.Warn("observe mode: node rebooted since it was verified; enforce would hold it with the startup taint until every check and gate passes again",
		"verified_boot_id", a.verifiedBoot(node), "boot_id", bootID(node), "taint", taintString(a.cfg.Taints.Startup))
	a.event(node, corev1.EventTypeWarning, api.EventNodeWouldBeHeldAfterReboot, "Observe",
		"observe mode: the node rebooted since it was verified (boot ID %s, verified under %s); enforce would have applied taint %s until every check and gate passes again",
		bootID(node), a.verifiedBoot(node), taintString(a.cfg.Taints.Startup))
}

// wouldHoldSummary is the condition's summary while enforce would hold the
// node with the startup taint: a new node, or one that rebooted.
func (a *Agent) wouldHoldSummary() string {
	if a.would.reboot {
		return "observe mode: rebooted since verified (boot ID changed): enforce would hold the node with the startup taint " +
			taintString(a.cfg.Taints.Startup) + " until every check and gate passes again"
	}
	return "observe mode: enforce would hold this new node with the startup taint " + taintString(a.cfg.Taints.Startup) +
		" until its checks pass"
}

// wouldHoldReason is the condition's reason while enforce would hold the
// node with the startup taint.
func (a *Agent) wouldHoldReason() string {
	if a.would.reboot {
		return api.ReasonWouldHoldAfterReboot
	}
	return api.ReasonWouldHold
}

// releasedAfterReboot is the end of a would-be hold after a reboot: the
// node is verified under the boot it runs now, recorded with the condition.
func (a *Agent) releasedAfterReboot(node *corev1.Node) {
	if a.would.reboot {
		a.loop.boot = bootID(node)
	}
}
