package doctor

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// A kubectl plugin cannot resolve a name from inside the cluster without
// exec, which doctor, read-only, does not do. The webhook, one pod in the
// cluster's network, resolves the agents' external names every minute and
// records each outcome as an Event on its Pod, the name in the Event's
// action (internal/api); doctor reads those Events.

// UnresolvedName is an external name of the agents' dns check that does
// not resolve from the webhook's pod: a problem, as every agent given it
// fails its dns check wherever the cluster answers as it does there.
type UnresolvedName struct {
	// Name is the external name.
	Name string `json:"name"`
	// Webhook is the webhook Deployment (namespace/name) that resolved it.
	Webhook string `json:"webhook"`
	// Pod is the webhook pod whose latest outcome it is.
	Pod string `json:"pod"`
	// LastSeen is when that pod last failed to resolve it, as the Event says.
	LastSeen time.Time `json:"lastSeen"`
	// Detail says what failed and what it does to the nodes.
	Detail string `json:"detail"`
	// Fixes are the alternatives that end it.
	Fixes []string `json:"fixes"`
}

// externalNamesOf are the agents' external names a webhook container
// resolves (its --check.dns.external-names or the environment twin).
func externalNamesOf(d *appsv1.Deployment) []string {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil
	}
	v, _, _ := Setting(d.Spec.Template.Spec.Containers[0], api.WebhookEnvPrefix, "", api.ExternalNamesFlag)
	var names []string
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// readExternalNames reads the Events on the Pods of each namespace that
// holds a webhook resolving external names. A failed read is recorded.
func (r *snapshot) readExternalNames(ctx context.Context, a Cluster) {
	for i := range r.deployments {
		d := &r.deployments[i]
		if len(externalNamesOf(d)) == 0 {
			continue
		}
		if _, done := r.podEvents[d.Namespace]; done {
			continue
		}
		events, err := a.ListPodEvents(ctx, d.Namespace)
		if err != nil {
			r.failed = append(r.failed, fmt.Sprintf("%v: whether the webhook's pods resolve the agents' external names is not known", err))
			continue
		}
		if r.podEvents == nil {
			r.podEvents = map[string][]eventsv1.Event{}
		}
		r.podEvents[d.Namespace] = events
	}
}

// unresolvedNames judges each webhook's external names by the newest
// outcome among its pods' Events (its pods are named after it): a name
// whose newest Event is ExternalNameUnresolved does not resolve. A name
// without an Event (a webhook too old to resolve it, or Events expired
// while it resolved) is not judged.
func unresolvedNames(deps []appsv1.Deployment, podEvents map[string][]eventsv1.Event) []UnresolvedName {
	out := []UnresolvedName{}
	for i := range deps {
		d := &deps[i]
		names := externalNamesOf(d)
		events, read := podEvents[d.Namespace]
		if len(names) == 0 || !read {
			continue
		}
		newest := map[string]*eventsv1.Event{}
		for j := range events {
			e := &events[j]
			if e.Reason != api.EventExternalNameUnresolved && e.Reason != api.EventExternalNameResolved ||
				e.Regarding.Kind != "Pod" || !strings.HasPrefix(e.Regarding.Name, d.Name+"-") || !slices.Contains(names, e.Action) {
				continue
			}
			if cur := newest[e.Action]; cur == nil || text.Line(e).LastSeen.After(text.Line(cur).LastSeen) {
				newest[e.Action] = e
			}
		}
		for _, name := range names {
			e := newest[name]
			if e == nil || e.Reason != api.EventExternalNameUnresolved {
				continue
			}
			l := text.Line(e)
			rest := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == name })
			drop := "stop checking it: remove it from agent.dns.externalNames (the agents' and the webhook's --" + api.ExternalNamesFlag + ")"
			if release := d.Labels[instanceLabel]; release != "" {
				in := Install{Namespace: d.Namespace, Release: release, ChartVersion: chartVersion(d.Labels)}
				drop = "stop checking it: " + HelmUpgrade(in, "agent.dns.externalNames={"+strings.Join(rest, ",")+"}")
			}
			out = append(out, UnresolvedName{
				Name: name, Webhook: d.Namespace + "/" + d.Name, Pod: e.Regarding.Name, LastSeen: l.LastSeen,
				Detail: fmt.Sprintf("%d %s, last at %s: %s. Every agent given it in agent.dns.externalNames "+
					"(--%s) fails its dns check wherever the cluster answers as it does for that pod, and is re-tainted within the fleet budget.",
					l.Count, text.Plural(int(l.Count), "time", "times"), l.LastSeen.UTC().Format(time.RFC3339), l.Note, api.ExternalNamesFlag),
				Fixes: []string{
					"make the cluster resolve it: the cluster DNS (CoreDNS) forwards it to a resolver that knows it, and the pods may reach that resolver",
					drop,
				},
			})
		}
	}
	return out
}

// printUnresolved writes the external names the webhook's pods do not
// resolve, numbered on from *n.
func printUnresolved(w io.Writer, names []UnresolvedName, n *int) {
	printFindings(w, "External names the webhook's pods do not resolve", names, n, func(u UnresolvedName) (string, string, []string) {
		return fmt.Sprintf("problem: %s does not resolve from webhook pod %s (%s)", u.Name, u.Pod, u.Webhook), u.Detail, u.Fixes
	})
}
