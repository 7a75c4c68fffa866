package kubectlplugin

import (
	"context"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// cleanupStatusCommand is `kubectl node-ready cleanup status`.
var cleanupStatusCommand = &command{
	path: "cleanup status", usage: "[-o json|yaml] [-l selector]", flags: []string{"output", "selector"},
	outputs: []string{OutputJSON, OutputYAML},
	short:   "Nodes being deleted whose cleanup holds them, plugin by plugin",
	long: `Lists the nodes being deleted (deletionTimestamp set) that still carry the finalizer
` + api.Finalizer + `, one line per cleanup plugin, from the webhook's ` + api.CleanupStatusAnnotation + `
annotation: how long ago the node was deleted, the attempt, when the next attempt comes after a
failed one, and each plugin's state (pending, running, done, skipped, failed: reason, dry run).
An annotation that cannot be read shows as "unreadable"; a node without one as "not started".
-o json and -o yaml print the same list as status does, for these nodes.`,
	run: runCleanupStatus,
}

func runCleanupStatus(ctx context.Context, inv *invocation) error {
	nodes, err := inv.api.ListNodes(ctx, inv.opts.Selector)
	if err != nil {
		return err
	}
	if inv.opts.Output == OutputJSON || inv.opts.Output == OutputYAML {
		// Only the list names the taints: the agent's keys are read for it.
		keys, warnings := readTaintKeys(ctx, inv)
		printWarnings(inv.err, warnings)
		return PrintList(inv.out, InCleanup(Reports(nodes, keys)), inv.opts.Output)
	}
	reports := InCleanup(Reports(nodes, PresetTaintKeys()))
	if len(reports) == 0 {
		text.Printf(inv.err, "%s\n", noneFound("No node is being deleted with the finalizer "+api.Finalizer, inv.opts.Selector))
		return nil
	}
	return PrintCleanup(inv.out, reports, inv.now)
}
