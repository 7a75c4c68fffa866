package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// A finalizer of ours on a node holds its deletion until a running webhook
// removes it. When none does — the webhook disabled or deleted without the
// removal Job (an Argo CD app deleted, manifests applied by hand), scaled to
// zero, or renamed away from the name — every deletion of such a node
// hangs, Terminating for ever.

// HeldFinalizer is a finalizer of ours on nodes that no running webhook
// removes, and how to let them go.
type HeldFinalizer struct {
	// Finalizer is the finalizer's name.
	Finalizer string `json:"finalizer"`
	// Nodes are the nodes carrying it, sorted.
	Nodes []string `json:"nodes"`
	// Deleting are those of Nodes already being deleted: stuck now.
	Deleting []string `json:"deleting,omitempty"`
	// Detail says why nothing removes it.
	Detail string `json:"detail"`
	// Fixes are the steps that let the nodes go, all of them: repair the
	// webhook, or take the finalizer off each node.
	Fixes []string `json:"fixes"`
}

// remover is one webhook Deployment of ours and the finalizers it removes
// after cleanup: its --finalizer and the names it honours as older ones.
type remover struct {
	name    string // namespace/name
	ready   bool   // a replica is ready
	cleanup bool   // it runs cleanups (--cleanup is not false)
	removes []string
}

// removersOf reads the webhook Deployments.
func removersOf(deps []appsv1.Deployment) []remover {
	var out []remover
	for i := range deps {
		d := &deps[i]
		if len(d.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		fin, _, _ := Setting(c, api.WebhookEnvPrefix, api.Finalizer, api.FinalizerFlag)
		raw, _, _ := Setting(c, api.WebhookEnvPrefix, "", api.LegacyFinalizersFlag)
		var legacy flagenv.StringList
		_ = legacy.Set(raw) // Set never fails
		cleanup, _, _ := Setting(c, api.WebhookEnvPrefix, "true", api.CleanupFlag)
		out = append(out, remover{
			name:    d.Namespace + "/" + d.Name,
			ready:   d.Status.ReadyReplicas > 0,
			cleanup: cleanup != "false",
			removes: append([]string{fin}, api.HonouredFinalizers(fin, legacy)...),
		})
	}
	return out
}

// heldFinalizers are the finalizers of ours (every name the project
// shipped, and those the webhooks were configured with) on nodes that no
// ready, cleaning webhook removes.
func heldFinalizers(nodes []corev1.Node, deps []appsv1.Deployment) []HeldFinalizer {
	removers := removersOf(deps)
	ours := api.ShippedFinalizers()
	for _, r := range removers {
		ours = text.AppendNew(ours, r.removes...)
	}
	covered := func(f string) bool {
		return slices.ContainsFunc(removers, func(r remover) bool { return r.ready && r.cleanup && slices.Contains(r.removes, f) })
	}
	held := map[string]*HeldFinalizer{}
	for i := range nodes {
		n := &nodes[i]
		for _, f := range n.Finalizers {
			if !slices.Contains(ours, f) || covered(f) {
				continue
			}
			h := held[f]
			if h == nil {
				h = &HeldFinalizer{Finalizer: f}
				held[f] = h
			}
			h.Nodes = append(h.Nodes, n.Name)
			if n.DeletionTimestamp != nil {
				h.Deleting = append(h.Deleting, n.Name)
			}
		}
	}
	out := []HeldFinalizer{}
	for f, h := range held {
		sort.Strings(h.Nodes)
		sort.Strings(h.Deleting)
		h.Detail, h.Fixes = heldWhy(f, removers, nodes, h.Nodes)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Finalizer < out[j].Finalizer })
	return out
}

// heldWhy says why nothing removes f from names and how to let them go: a
// webhook that would remove it but is not ready is to be repaired (its
// cleanup then runs); otherwise the finalizer is taken off each node,
// guarded by the node's UID and the finalizer's place in the list.
func heldWhy(f string, removers []remover, nodes []corev1.Node, names []string) (string, []string) {
	var notReady, notCleaning []string
	for _, r := range removers {
		if !slices.Contains(r.removes, f) {
			continue
		}
		if !r.ready {
			notReady = append(notReady, r.name)
		} else if !r.cleanup {
			notCleaning = append(notCleaning, r.name)
		}
	}
	var detail string
	switch {
	case len(notReady) > 0:
		ns, name, _ := strings.Cut(notReady[0], "/")
		return fmt.Sprintf("webhook %s removes it but has no ready replica: deletions of these nodes wait for it", strings.Join(notReady, ", ")),
			[]string{fmt.Sprintf("make the webhook ready again (its cleanup then runs and removes the finalizer): kubectl rollout status deployment/%s --namespace %s; kubectl describe deployment/%s --namespace %s", name, ns, name, ns)}
	case len(notCleaning) > 0:
		detail = fmt.Sprintf("webhook %s runs with --cleanup=false and removes nothing", strings.Join(notCleaning, ", "))
	case len(removers) == 0:
		detail = "no webhook of kube-node-ready runs (disabled or deleted without its removal Job)"
	default:
		detail = "no running webhook names it (renamed away from it?)"
	}
	var fixes []string
	for _, name := range names {
		for i := range nodes {
			n := &nodes[i]
			if n.Name != name {
				continue
			}
			at := slices.Index(n.Finalizers, f)
			path := "/metadata/finalizers/" + strconv.Itoa(at)
			patch, _ := jsonpatch.Marshal(jsonpatch.Test("/metadata/uid", string(n.UID)), jsonpatch.Test(path, f), jsonpatch.Remove(path))
			fixes = append(fixes, fmt.Sprintf("kubectl patch node %s --type=json -p '%s'", n.Name, patch))
		}
	}
	if len(fixes) > 1 {
		fixes[0] = "take it off each node (no cleanup runs for it): " + fixes[0]
	} else if len(fixes) == 1 {
		fixes[0] = "take it off the node (no cleanup runs for it): " + fixes[0]
	}
	return detail, fixes
}
