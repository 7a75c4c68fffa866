package kubectlplugin

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// whyCommand is `kubectl node-ready why`.
var whyCommand = &command{
	path: "why", usage: "NODE [--events N]", nargs: 1, flags: []string{"events"},
	short: "Why a node is (un)verified: the agent's condition, its last round, recent Events",
	long: `Shows for one node:

  - its verified label, our taints (the keys as status --help says), the bypass annotation and
    its cleanup;
  - the agent's ` + api.ConditionType + ` condition: status, reason, message, last transition and when it
    was last written;
  - the agent's last reported round, read from that condition: the agent rewrites the condition
    only when the outcome changes (another check fails, the node recovers), so this is the
    latest change, not necessarily the latest round; rounds since then had the same outcome
    as long as the agent runs;
  - the newest Events about the node (events.k8s.io/v1, regarding.kind=Node and regarding.name),
    oldest first and newest last, with each Event's series count. They are looked for in all
    namespaces (Events about nodes live in "default"), or in the one --namespace names; when
    listing all namespaces is not allowed, in "default".`,
	run: runWhy,
}

func runWhy(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	keys, warnings := readTaintKeys(ctx, inv)
	why := Why{Report: Report(node, keys), Keys: keys, EventsScope: "all namespaces"}
	ns := ""
	if inv.explicit {
		ns, why.EventsScope = inv.namespace, "namespace "+inv.namespace
	}
	events, err := inv.api.ListNodeEvents(ctx, ns, name)
	if apierrors.IsForbidden(err) && ns == "" {
		why.EventsScope = "namespace " + metav1.NamespaceDefault + " (listing all namespaces is not allowed)"
		events, err = inv.api.ListNodeEvents(ctx, metav1.NamespaceDefault, name)
	}
	if err != nil {
		why.EventsErr = err.Error()
	} else {
		why.Events, why.EventsTotal = text.EventLines(events, inv.opts.Events)
	}
	if err := PrintWhy(inv.out, why, inv.now); err != nil {
		return err
	}
	if why.EventsErr != "" {
		text.Printf(inv.err, "warning: Events not shown: %s\n", why.EventsErr)
	}
	printWarnings(inv.err, warnings)
	return nil
}
