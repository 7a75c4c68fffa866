package agent

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Re-verification after a reboot (Config.ReverifyAfterReboot,
// --reverify-after-reboot). A node that reboots, or is updated in place,
// comes back with its verified label and takes workloads before its network
// or drivers are up. The agent records the boot ID (status.nodeInfo.bootID,
// written by the kubelet) the node was verified under in its own condition
// ("boot: <id>", api.ConditionMessage.Boot), the one place of the node it
// may write besides its taints and label. When the node's boot ID differs,
// the agent holds its node again with the startup taint and the label
// verified=false, under the gates of a re-taint (fleet.go retaint: the
// suspend switch, the re-taint Lease, the fleet budget, the bypass
// annotation on the version written) and never in observe mode. A held
// node runs the bootstrap set (every check and gate) and is released, its
// new boot ID recorded, when a round passes.
//
// The label "false" is what makes the hold safe for the rest of the
// project: the fleet budget counts it (a cluster-wide power event holds at
// most the budget), and remediation reads a node with a label as verified
// once, never as a new node it may delete.

// RebootHeld reports whether node is held after a reboot: it carries the
// startup taint (or a previous startup key) with the verified label
// "false" and no unhealthy taint. A re-taint never leaves that state (it
// uses the unhealthy taint, which --reverify-after-reboot requires to
// differ from the startup taint), and a new node carries no label.
func RebootHeld(node *corev1.Node, t Taints, labelKey string) bool {
	return t.Unhealthy != t.Startup && node.Labels[labelKey] == "false" &&
		t.startupOn(node.Spec.Taints) && !t.unhealthyOn(node.Spec.Taints)
}

// Rebooted reports whether a node verified under boot ID recorded runs
// under current now. A node with no recorded boot ID (verified before the
// feature was on, or by an older agent) did not reboot as far as anyone
// knows: its current boot ID is recorded instead.
func Rebooted(recorded, current string) bool {
	return recorded != "" && current != "" && recorded != current
}

// recordedBoot is the boot ID the node's condition says it was verified
// under, or "".
func recordedBoot(node *corev1.Node) string {
	for _, c := range node.Status.Conditions {
		if c.Type != ConditionType {
			continue
		}
		if m, err := api.ParseConditionMessage(c.Message); err == nil {
			return m.Boot
		}
	}
	return ""
}

// bootID is the node's boot ID as the kubelet reports it; "" when it is not
// one the condition message can carry.
func bootID(node *corev1.Node) string {
	id := node.Status.NodeInfo.BootID
	if strings.ContainsAny(id, ";,: ") {
		return ""
	}
	return id
}

// verifiedBoot is the boot ID node was verified under: the one this agent
// recorded (a.loop.boot), else the one its condition carries, else, on a
// verified node with none recorded, the current one, which is then
// recorded with the next condition. "" on a node never verified.
func (a *Agent) verifiedBoot(node *corev1.Node) string {
	if a.loop.boot != "" {
		return a.loop.boot
	}
	if b := recordedBoot(node); b != "" {
		a.loop.boot = b
		return b
	}
	if node.Labels[a.cfg.VerifiedLabel] == "true" {
		a.loop.boot = bootID(node)
	}
	return a.loop.boot
}

// rebootedOn reports whether node, verified and in service (label "true",
// no taint of ours), runs under another boot ID than it was verified under.
func (a *Agent) rebootedOn(node *corev1.Node) bool {
	t := a.cfg.Taints
	if node.Labels[a.cfg.VerifiedLabel] != "true" || t.startupOn(node.Spec.Taints) || HasTaint(node.Spec.Taints, t.Unhealthy) || t.unhealthyOn(node.Spec.Taints) {
		return false
	}
	return Rebooted(a.verifiedBoot(node), bootID(node))
}

// holdAfterReboot holds node with the startup taint when it rebooted since
// it was verified, within the gates of a re-taint. It reports whether the
// node is held now. The boot ID is compared on a fresh read (the watch may
// lag the kubelet's status), and again on the version the patch applies to
// (refusedOn).
func (a *Agent) holdAfterReboot(ctx context.Context, node *corev1.Node) bool {
	if !a.cfg.ReverifyAfterReboot || a.cfg.Observe || a.cfg.Publish || a.bypassed(node) || !a.rebootedOn(node) {
		return false
	}
	fresh, err := a.view.read(ctx)
	if err != nil {
		a.log.Warn("node rebooted; cannot read it fresh, not holding it this round", "error", err)
		return false
	}
	if a.bypassed(fresh) || !a.rebootedOn(fresh) {
		return false
	}
	startup := a.cfg.Taints.Startup
	want := Desired{Add: &startup, Label: "false", Reboot: true}
	if err := a.retaint(ctx, fresh, want); err != nil {
		a.log.Warn("node rebooted; holding it failed, retried next round", "error", err)
		return false
	}
	n := a.view.node()
	return n != nil && RebootHeld(n, a.cfg.Taints, a.cfg.VerifiedLabel)
}

// rebootRefusedOn says why the hold want must not be written to node, in
// the version the patch applies to, or "".
func (a *Agent) rebootRefusedOn(node *corev1.Node) string {
	if !a.rebootedOn(node) {
		return "the node is not verified and in service under another boot ID than it was verified under"
	}
	return ""
}

// stampBoot adds the boot ID the node was verified under to want's
// message, while re-verification after a reboot is on. A message in
// another shape is left alone.
func (a *Agent) stampBoot(node *corev1.Node, want ConditionState) ConditionState {
	if !a.cfg.ReverifyAfterReboot {
		return want
	}
	boot := a.verifiedBoot(node)
	if boot == "" {
		return want
	}
	m, err := api.ParseConditionMessage(want.Message)
	if err != nil {
		return want
	}
	m.Boot = boot
	want.Message = m.String()
	return want
}

// RebootHeldCondition is the condition of a node held after a reboot
// whose checks or gates fail: which, and since when.
func RebootHeldCondition(failed []string, since time.Time, modes CheckModes) ConditionState {
	m := modes.message("rebooted since verified (boot ID changed): held with the startup taint until every check and gate passes again")
	m.Failing, m.Since = failed, since
	return ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonRebooted, Message: m.String()}
}
