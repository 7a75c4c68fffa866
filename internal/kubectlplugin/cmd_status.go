package kubectlplugin

import (
	"context"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// statusCommand is `kubectl node-ready status`.
var statusCommand = &command{
	path: "status", usage: "[-o wide|json|yaml] [-l selector]", flags: []string{"output", "selector"},
	outputs: []string{OutputWide, OutputJSON, OutputYAML},
	short:   "One line per node: verified, our taint, failing checks, age, cleanup",
	long: `Shows one line per node (sorted by name):

  NAME      the node
  VERIFIED  the agent's label ` + api.VerifiedLabel + `: true, false (re-tainted, or held after a
            reboot), unknown (not set)
  TAINT     which of the agent's taints the node carries (any value or effect): unverified (a
            startup key; "unverified (after reboot)" when the agent holds the node after a
            reboot), unhealthy (an unhealthy key), none. The keys are every autoscaler
            preset's, startup: ` + strings.Join(api.PreviousStartupTaintKeys(), ", ") + `;
            unhealthy: ` + strings.Join(api.PreviousUnhealthyTaintKeys(), ", ") + `;
            and the --startup-taint, --unhealthy-taint and --previous-taint-keys of each agent
            DaemonSet (pod label app=` + doctor.AgentApp + `, looked for as doctor does)
  FAILING   the failing checks the agent's ` + api.ConditionType + ` condition names, "-" when none
  AGE       since the node was created
  CLEANUP   none; skip (` + api.SkipCleanupAnnotation + `=true set in advance); or, for a node
            being deleted, "deleting:" and where its cleanup stands from the webhook's
            ` + api.CleanupStatusAnnotation + ` annotation ("deleting: attempt 2, 1 failed"),
            "not started", "status unreadable", "skip requested" or "finalizer gone"

-o wide adds REASON (the condition's reason), BYPASS (` + api.SkipVerificationAnnotation + `=true) and
FINALIZER (` + api.Finalizer + ` present). -o json and -o yaml print a list of kind ` + ListKind + `
(apiVersion ` + ListAPIVersion + `; fields are only ever added), with the condition and the
parsed cleanup status of each node.`,
	run: runStatus,
}

func runStatus(ctx context.Context, inv *invocation) error {
	nodes, err := inv.api.ListNodes(ctx, inv.opts.Selector)
	if err != nil {
		return err
	}
	keys, warnings := readTaintKeys(ctx, inv)
	printWarnings(inv.err, append(warnings, doctor.MissedAdmission(nodes)...))
	reports := Reports(nodes, keys)
	if inv.opts.Output == OutputJSON || inv.opts.Output == OutputYAML {
		return PrintList(inv.out, reports, inv.opts.Output)
	}
	// The suspend switch first: while it is on, what the table shows will
	// not lead to a re-taint or a replacement.
	on, unreadable := switchLines(ctx, inv)
	printWarnings(inv.err, unreadable)
	for _, l := range on {
		text.Printf(inv.out, "%s\n", l)
	}
	if len(reports) == 0 {
		text.Printf(inv.err, "%s\n", noneFound("No nodes found", inv.opts.Selector))
		return nil
	}
	return PrintStatus(inv.out, reports, inv.opts.Output == OutputWide, inv.now)
}

func noneFound(what, selector string) string {
	if selector != "" {
		return what + " matching " + selector + "."
	}
	return what + "."
}
