package kubectlplugin

import (
	"context"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// unbypassCommand is `kubectl node-ready unbypass`.
var unbypassCommand = &command{
	path: "unbypass", usage: "NODE", nargs: 1,
	short: "Verify a node again: remove " + api.SkipVerificationAnnotation,
	long: `Removes the annotation ` + api.SkipVerificationAnnotation + ` from the node (a merge patch of that one
annotation). The agent resumes its checks, and re-taints the node if they keep failing. The name
is the deployed agent's, as bypass reads it (the default's is removed too).`,
	run: runUnbypass,
}

func runUnbypass(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	deployed, notes := readAnnotationNames(ctx, inv, skipVerification)
	printNotes(inv, notes)
	var present []string
	for _, n := range text.AppendNew(deployed, api.SkipVerificationAnnotation) {
		if _, ok := node.Annotations[n]; ok {
			present = append(present, n)
		}
	}
	if len(present) == 0 {
		text.Printf(inv.out, "node/%s is not bypassed (no %s): nothing changed\n", name, strings.Join(deployed, ", "))
		return nil
	}
	patch, err := annotationPatch(string(node.UID), present, nil)
	if err != nil {
		return err
	}
	if err := inv.api.PatchNode(ctx, name, patch); err != nil {
		return err
	}
	text.Printf(inv.out, "node/%s unbypassed: %s removed; the agent checks the node again and re-taints it if its checks keep failing\n", name, strings.Join(present, ", "))
	return nil
}
