package kubectlplugin

import (
	"context"
	"fmt"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// unbypassCommand is `kubectl node-ready unbypass`.
var unbypassCommand = &command{
	path: "unbypass", usage: "NODE", nargs: 1,
	short: "Verify a node again: remove " + api.SkipVerificationAnnotation,
	long: `Removes the annotation ` + api.SkipVerificationAnnotation + ` from the node (a merge patch of that one
annotation). The agent resumes its checks, and re-taints the node if they keep failing.`,
	run: runUnbypass,
}

func runUnbypass(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	if _, ok := node.Annotations[api.SkipVerificationAnnotation]; !ok {
		fmt.Fprintf(inv.out, "node/%s is not bypassed (no %s): nothing changed\n", name, api.SkipVerificationAnnotation)
		return nil
	}
	patch, err := annotationPatch(string(node.UID), api.SkipVerificationAnnotation, nil)
	if err != nil {
		return err
	}
	if err := inv.api.PatchNode(ctx, name, patch); err != nil {
		return err
	}
	fmt.Fprintf(inv.out, "node/%s unbypassed: %s removed; the agent checks the node again and re-taints it if its checks keep failing\n", name, api.SkipVerificationAnnotation)
	return nil
}
