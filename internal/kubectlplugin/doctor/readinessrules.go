package doctor

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// What doctor reads of the node readiness controller
// (kubernetes-sigs/node-readiness-controller): its NodeReadinessRules, when
// the API server serves them. A rule owns the taint its key names on the
// nodes it selects, adopting one already there; keyed
// readiness.k8s.io/node-ready (autoscaler karpenter's startup key, and the
// key admission adds to a Karpenter node whose NodePool declares none of
// ours) or our startup key, it adopts our taint. Also the agent's mode and
// --reverify-after-reboot, with the nodes held after a reboot now.

// ReadinessRule is what doctor reads of a NodeReadinessRule.
type ReadinessRule struct {
	Name            string   `json:"name"`
	Taint           Taint    `json:"taint"`
	Conditions      []string `json:"conditions"`
	EnforcementMode string   `json:"enforcementMode"`
}

// RuleFinding is what doctor says about a NodeReadinessRule that adopts a
// taint of ours.
type RuleFinding struct {
	Rule     string   `json:"rule"`
	Key      string   `json:"key"`
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail"`
	Fixes    []string `json:"fixes,omitempty"`
}

// readRules reads the NodeReadinessRules into r; a failed read is recorded.
func (r *snapshot) readRules(ctx context.Context, a Cluster) {
	rules, served, err := a.ListNodeReadinessRules(ctx)
	if err != nil {
		r.failed = append(r.failed, err.Error())
		return
	}
	r.rulesServed = served
	r.rules = rules
	slices.SortFunc(r.rules, func(a, b ReadinessRule) int { return strings.Compare(a.Name, b.Name) })
}

// readAgentModes adds the agent container c's --mode (when not enforce)
// and --reverify-after-reboot to in.
func readAgentModes(in *Install, c corev1.Container) []string {
	var warnings []string
	mode, _, w := Setting(c, api.AgentEnvPrefix, api.ModeEnforce, api.ModeFlag)
	if w != "" {
		warnings = append(warnings, w)
	}
	if mode != api.ModeEnforce {
		in.Mode = mode
	}
	reverify, _, w := Setting(c, api.AgentEnvPrefix, "false", api.ReverifyAfterRebootFlag)
	if w != "" {
		warnings = append(warnings, w)
	}
	in.ReverifyAfterReboot = reverify == "true"
	return warnings
}

// heldAfterReboot names the nodes whose agent holds them after a reboot
// (condition reason Rebooted).
func heldAfterReboot(nodes []corev1.Node) []string {
	var out []string
	for i := range nodes {
		if rebooted(&nodes[i]) {
			out = append(out, nodes[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

// ourConditions reports whether conditions name a condition of the agent's.
func ourConditions(conditions []string) bool {
	return slices.ContainsFunc(conditions, func(c string) bool {
		return c == api.ConditionType || strings.HasPrefix(c, api.CheckConditionPrefix)
	})
}

// ruleFindings says, for each rule keyed readiness.k8s.io/node-ready or
// with an installation's startup key, that it adopts our taint, and what
// to do: in enforce or observe mode the controller and the agent fight
// over the key (a problem); in publish mode the rule owning it is the
// point (advice, when it names none of our conditions so much the more).
func ruleFindings(rules []ReadinessRule, installs []Install) []RuleFinding {
	var out []RuleFinding
	for _, r := range rules {
		var in Install
		found := false
		for _, i := range installs {
			if i.Startup.Key == r.Taint.Key {
				in, found = i, true
				break
			}
		}
		if !found && r.Taint.Key != api.KarpenterStartupTaintKey {
			continue
		}
		if !found && len(installs) > 0 {
			in = installs[0]
		}
		how := "it is the agent's startup taint"
		if in.Startup.Key != r.Taint.Key {
			how = "it is the startup key of autoscaler karpenter, and the key admission adds to a Karpenter node whose NodePool declares none of ours"
		}
		f := RuleFinding{Rule: r.Name, Key: r.Taint.Key,
			Summary: fmt.Sprintf("NodeReadinessRule %s adopts our taint %s", r.Name, r.Taint.Key)}
		adopt := "The node readiness controller adopts a taint with a rule's key and effect already on a node: it removes it when the rule's conditions hold and puts it back when they do not, whoever added it. "
		if in.Mode == api.ModePublish {
			f.Severity = Advice
			f.Detail = adopt + "Here " + how + "; the agents run in publish mode, where they add no taint and remove none under " + api.NodeReadinessTaintPrefix +
				", so the rule owning it is no conflict (with webhook.startupTaint.injectInPublishMode admission adds the startup taint at creation for the rule to adopt, on purpose)."
			if in.Startup.Key == r.Taint.Key && !ourConditions(r.Conditions) {
				f.Detail += " But the rule's conditions name none of ours (" + api.ConditionType + ", " + api.CheckConditionPrefix + "<check>): our checks hold no node."
				f.Fixes = []string{fmt.Sprintf("create the rule anew (its conditions are immutable) with the condition %s, requiredStatus \"True\" (docs/autoscalers.md, Node readiness controller), then kubectl delete nodereadinessrule %s", api.ConditionType, r.Name)}
			}
		} else {
			mode := in.Mode
			if mode == "" {
				mode = api.ModeEnforce
			}
			f.Severity = Problem
			ours := "adds and removes that key itself"
			if mode == api.ModeObserve {
				ours = "removes that key at once wherever it finds it"
			}
			f.Detail = adopt + "Here " + how + ", and in " + mode + " mode kube-node-ready " + ours + ": the two fight over it, and where the rule's conditions do not hold (another component's, or ours while a check fails) the controller puts the startup taint back on a verified node."
			publish := "run the agents and the webhook with --mode=publish, so that the rule owns the taint and the agents only publish their condition (docs/autoscalers.md, Node readiness controller)"
			if in.Release != "" {
				publish = HelmUpgrade(in, "mode="+api.ModePublish) + ": the rule owns the taint, the agents only publish their condition (docs/autoscalers.md, Node readiness controller)"
			}
			f.Fixes = []string{
				fmt.Sprintf("give the rule a key of its own (its taint is immutable): create it anew with, say, %skube-node-ready, then kubectl delete nodereadinessrule %s", api.NodeReadinessTaintPrefix, r.Name),
				publish,
			}
		}
		out = append(out, f)
	}
	return out
}

// printRules writes the rule findings, numbered on from *n.
func printRules(w io.Writer, findings []RuleFinding, n *int) {
	printFindings(w, "NodeReadinessRules (node readiness controller)", findings, n, func(f RuleFinding) (string, string, []string) {
		return fmt.Sprintf("%s: %s", f.Severity, f.Summary), f.Detail, f.Fixes
	})
}

// printInstallModes writes an installation's mode when it is not enforce
// and its re-verification after a reboot, with the nodes held now.
func printInstallModes(tw *tabwriter.Writer, in InstallReport) {
	switch in.Mode {
	case "":
	case api.ModeObserve:
		text.Printf(tw, "  mode:\tobserve (no taint added; what enforce would do is recorded)\n")
	case api.ModePublish:
		text.Printf(tw, "  mode:\tpublish (a NodeReadinessRule owns the taint; the agents publish their condition)\n")
	default:
		text.Printf(tw, "  mode:\t%s\n", in.Mode)
	}
	if !in.ReverifyAfterReboot {
		return
	}
	held := "none held now"
	if len(in.HeldAfterReboot) > 0 {
		held = fmt.Sprintf("%d held now (condition reason %s): %s", len(in.HeldAfterReboot), api.ReasonRebooted, strings.Join(in.HeldAfterReboot, ", "))
	}
	text.Printf(tw, "  after a reboot:\ta node is held with the startup taint until it verifies again (--reverify-after-reboot); %s\n", held)
}

// rebooted says the agent holds node after a reboot: its condition's
// reason says so.
func rebooted(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if string(c.Type) == api.ConditionType && c.Reason == api.ReasonRebooted {
			return true
		}
	}
	return false
}
