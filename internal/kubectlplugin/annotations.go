package kubectlplugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// bypassAnnotation is one of the two bypass annotations as the deployed
// release names it: which workloads read it, under which flag of theirs.
type bypassAnnotation struct {
	// what names it in notes: "skip-verification annotation".
	what string
	// def is the binaries' default name.
	def string
	// workload says what reads it: "agent DaemonSet", "webhook Deployment".
	workload string
	// list reads the workloads of ours in a namespace ("" for all) and
	// returns the containers that read the annotation, each with who it is.
	list func(ctx context.Context, a API, namespace string) ([]namedContainer, error)
	// prefix and flags are the container's environment prefix and the
	// flag's names, current first.
	prefix string
	flags  []string
}

// namedContainer is a container of one of our workloads.
type namedContainer struct {
	who string
	c   corev1.Container
}

// skipVerification is the agent's bypass: --skip-verification-annotation of
// each agent DaemonSet.
var skipVerification = bypassAnnotation{
	what: "skip-verification annotation", def: api.SkipVerificationAnnotation, workload: "agent DaemonSet",
	prefix: api.AgentEnvPrefix, flags: []string{api.SkipVerificationAnnotationFlag},
	list: func(ctx context.Context, a API, ns string) ([]namedContainer, error) {
		dss, err := a.ListDaemonSets(ctx, ns)
		var out []namedContainer
		for _, ds := range dss {
			if doctor.IsOurs(ds.Spec.Template, doctor.AgentApp) && len(ds.Spec.Template.Spec.Containers) > 0 {
				out = append(out, namedContainer{"DaemonSet " + ds.Namespace + "/" + ds.Name, doctor.AgentContainer(ds.Spec.Template)})
			}
		}
		return out, err
	},
}

// skipCleanup is the webhook's bypass: --skip-cleanup-annotation of each
// webhook Deployment.
var skipCleanup = bypassAnnotation{
	what: "skip-cleanup annotation", def: api.SkipCleanupAnnotation, workload: "webhook Deployment",
	prefix: api.WebhookEnvPrefix, flags: []string{api.SkipCleanupAnnotationFlag},
	list: func(ctx context.Context, a API, ns string) ([]namedContainer, error) {
		deps, err := a.ListDeployments(ctx, ns)
		var out []namedContainer
		for _, d := range deps {
			if doctor.IsOurs(d.Spec.Template, doctor.WebhookApp) && len(d.Spec.Template.Spec.Containers) > 0 {
				out = append(out, namedContainer{"Deployment " + d.Namespace + "/" + d.Name, d.Spec.Template.Spec.Containers[0]})
			}
		}
		return out, err
	},
}

// readAnnotationNames are the names the deployed workloads give b, each
// once, looked for where doctor looks (--namespace, else all namespaces,
// else the context's). With none found, or none readable, it is b's
// default, and notes say so (and why) for stderr.
func readAnnotationNames(ctx context.Context, inv *invocation, b bypassAnnotation) (names, notes []string) {
	ns, fallback := "", inv.namespace
	if inv.explicit {
		ns, fallback = inv.namespace, ""
	}
	cs, in, _, err := doctor.ListFallback(ctx, ns, fallback, "kube-node-ready", func(ctx context.Context, ns string) ([]namedContainer, error) {
		return b.list(ctx, inv.api, ns)
	})
	if err != nil {
		return []string{b.def}, []string{fmt.Sprintf("warning: %v: using the default %s %s", err, b.what, b.def)}
	}
	for _, c := range cs {
		name, _, w := doctor.Setting(c.c, b.prefix, b.def, b.flags...)
		if w != "" {
			notes = append(notes, "warning: "+w)
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return []string{b.def}, append(notes, fmt.Sprintf("note: no kube-node-ready %s found in %s: using the default %s %s (pass --namespace to read your release's)",
			b.workload, doctor.ScopeName(in), b.what, b.def))
	}
	if len(names) > 1 {
		notes = append(notes, fmt.Sprintf("note: the %ss found name different %ss: %s; all of them are used", b.workload, b.what, strings.Join(names, ", ")))
	}
	return names, notes
}

// printNotes writes notes, each on a line, to w.
func printNotes(inv *invocation, notes []string) {
	for _, n := range notes {
		text.Printf(inv.err, "%s\n", n)
	}
}

// setTo are names=value joined for a message: "a=true, b=true".
func setTo(names []string, value string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + value
	}
	return strings.Join(parts, ", ")
}

// allSet says whether node carries every one of names with value.
func allSet(node *corev1.Node, names []string, value string) bool {
	for _, n := range names {
		if node.Annotations[n] != value {
			return false
		}
	}
	return true
}
