package kubectlplugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// cleanupSkipCommand is `kubectl node-ready cleanup skip`.
var cleanupSkipCommand = &command{
	path: "cleanup skip", usage: "NODE [--yes]", nargs: 1, flags: []string{"yes"},
	short: "Let a node go without cleanup: set " + api.SkipCleanupAnnotation + "=true",
	long: `Sets the annotation ` + api.SkipCleanupAnnotation + `=true on the node (a merge patch of that one
annotation, guarded by the node's UID): the webhook removes its finalizer without running the
cleanup plugins, also while a cleanup is running. Whatever the plugins would have cleaned up
(volume attachments, storage, external inventories, notifications) stays as it is. On a node
that is not being deleted, the annotation waits there for its deletion.

Without --yes it shows where the node's cleanup stands and asks "[y/N]" on stderr, reading
the answer from stdin, also when stdin is not a terminal (echo y | kubectl node-ready cleanup
skip NODE). Anything but y or yes, or no answer at all (stdin empty or closed), leaves the node
untouched and exits with status 1.

The annotation's name is the deployed webhook's (--skip-cleanup-annotation of each webhook
Deployment, looked for as doctor looks); with no webhook Deployment found, the default, and a note
says so.`,
	run: runCleanupSkip,
}

func runCleanupSkip(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	names, notes := readAnnotationNames(ctx, inv, skipCleanup)
	printNotes(inv, notes)
	if allSet(node, names, "true") {
		text.Printf(inv.out, "node/%s already has %s: nothing changed\n", name, setTo(names, "true"))
		return nil
	}
	c := CleanupOf(node)
	if !inv.opts.Yes {
		text.Printf(inv.err, "Node %s: cleanup %s.\n", name, c.Summary)
		if c.State != CleanupDeleting {
			text.Printf(inv.err, "The node is not being deleted: the annotation waits for its deletion.\n")
		}
		text.Printf(inv.err, "The webhook will remove the finalizer %s without running the cleanup plugins;\n"+
			"what they would clean up (volume attachments, storage, inventories, notifications) stays as it is.\n"+
			"Skip cleanup of node %s? [y/N] ", api.Finalizer, name)
		yes, err := readYes(inv.stdin)
		if err != nil {
			return fmt.Errorf("read the answer: %w", err)
		}
		if !yes {
			return declined(fmt.Sprintf("cleanup skip cancelled: node %s unchanged", name))
		}
	}
	value := "true"
	patch, err := annotationPatch(string(node.UID), names, &value)
	if err != nil {
		return err
	}
	if err := inv.api.PatchNode(ctx, name, patch); err != nil {
		return err
	}
	text.Printf(inv.out, "node/%s annotated %s: the webhook removes the finalizer %s without cleanup\n", name, setTo(names, "true"), api.Finalizer)
	return nil
}

// readYes reads one line and reports whether it says y or yes. No input at
// all (an empty or closed stdin) is a no.
func readYes(r io.Reader) (bool, error) {
	if r == nil {
		return false, nil
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
