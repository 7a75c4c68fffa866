package kubectlplugin

import (
	"context"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// bypassCommand is `kubectl node-ready bypass`.
var bypassCommand = &command{
	path: "bypass", usage: "NODE", nargs: 1,
	short: "Let a node through: set " + api.SkipVerificationAnnotation + "=true",
	long: `Sets the annotation ` + api.SkipVerificationAnnotation + `=true on the node (a merge patch of that one
annotation). The agent then removes its taints at once and never re-taints the node while the
annotation is there. Undo with unbypass.

The annotation's name is the deployed agent's (--skip-verification-annotation of each agent
DaemonSet, the chart's agent.skipAnnotation, looked for as doctor looks); with no agent DaemonSet
found, the default, and a note says so.`,
	run: runBypass,
}

func runBypass(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	names, notes := readAnnotationNames(ctx, inv, skipVerification)
	printNotes(inv, notes)
	if allSet(node, names, "true") {
		text.Printf(inv.out, "node/%s already bypassed (%s): nothing changed\n", name, setTo(names, "true"))
		return nil
	}
	value := "true"
	patch, err := annotationPatch(string(node.UID), names, &value)
	if err != nil {
		return err
	}
	if err := inv.api.PatchNode(ctx, name, patch); err != nil {
		return err
	}
	text.Printf(inv.out, "node/%s bypassed: %s; the agent removes its taints now and does not re-taint the node until `%s unbypass %s`\n",
		name, setTo(names, "true"), Name, name)
	return nil
}
