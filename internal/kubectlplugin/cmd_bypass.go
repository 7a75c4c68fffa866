package kubectlplugin

import (
	"context"
	"fmt"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// bypassCommand is `kubectl node-ready bypass`.
var bypassCommand = &command{
	path: "bypass", usage: "NODE", nargs: 1,
	short: "Let a node through: set " + api.SkipVerificationAnnotation + "=true",
	long: `Sets the annotation ` + api.SkipVerificationAnnotation + `=true on the node (a merge patch of that one
annotation). The agent then removes its taints at once and never re-taints the node while the
annotation is there. Undo with unbypass.`,
	run: runBypass,
}

func runBypass(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	if node.Annotations[api.SkipVerificationAnnotation] == "true" {
		fmt.Fprintf(inv.out, "node/%s already bypassed (%s=true): nothing changed\n", name, api.SkipVerificationAnnotation)
		return nil
	}
	value := "true"
	patch, err := annotationPatch(string(node.UID), api.SkipVerificationAnnotation, &value)
	if err != nil {
		return err
	}
	if err := inv.api.PatchNode(ctx, name, patch); err != nil {
		return err
	}
	fmt.Fprintf(inv.out, "node/%s bypassed: %s=true; the agent removes its taints now and does not re-taint the node until `%s unbypass %s`\n",
		name, api.SkipVerificationAnnotation, Name, name)
	return nil
}
