package kubectlplugin

import (
	"context"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// doctorCommand is `kubectl node-ready doctor`.
var doctorCommand = &command{
	path: "doctor", usage: "[-o json|yaml]", flags: []string{"output"},
	outputs: []string{OutputJSON, OutputYAML},
	short:   "How the autoscalers treat our taints, what goes wrong and the exact fix",
	long: `Reads, read-only, what it can see of the cluster:

  - kube-node-ready's agent DaemonSet and webhook Deployment (pod labels app=` + doctor.AgentApp + ` and
    app=` + doctor.WebhookApp + `, in the namespace --namespace names, else in all namespaces):
    the agent's --autoscaler, --startup-taint and --unhealthy-taint (resolved as the agent does),
    the webhook's --remediation and --unverified-deadline, or their KNR_* twins;
  - every Deployment running Cluster Autoscaler (image or program named cluster-autoscaler, any
    namespace): its --startup-taint/--ignore-taint, --status-taint, --startup-taint-prefix,
    --max-node-provision-time and --max-node-startup-time;
  - Karpenter's NodePools (karpenter.sh/v1): spec.template.spec.startupTaints and taints, and
    the release of every Deployment running Karpenter (its controller image's tag, else its
    app.kubernetes.io/version or helm.sh/chart label);
  - every node's taints, and the ControllerRevisions of the agent DaemonSets (the keys earlier
    configurations wrote).

and says, for each of our taint keys, how each autoscaler present treats a node carrying it:
Cluster Autoscaler startup, status or unknown (its reserved prefixes work without flags:
` + doctor.CAStartupPrefix + ` and
` + doctor.CAStatusPrefix + `);
Karpenter startup or permanent (keys under ` + doctor.KarpenterEphemeralPrefix + ` are startup from Karpenter
v` + doctor.KarpenterReadinessSince + `; below it, or when no Deployment shows the release, they are permanent unless the
NodePool declares them in startupTaints). Then what goes wrong
(over-scale, template poisoning, runaway launches, a deadline past Cluster Autoscaler's) and the
exact change that fixes it: the Cluster Autoscaler flag to add, the kubectl patch of the NodePool,
or the chart value. With no Cluster Autoscaler Deployment visible and no Karpenter, it advises for
a managed Cluster Autoscaler (GKE, AKS), where only the reserved prefixes work.

It also names every taint of ours on a node (a key of any preset, of an agent's or the webhook's
flags, or of an earlier revision of an agent DaemonSet) that no running agent removes, with the
nodes and the fix: after a key changed without the old one in agent.previousTaintKeys. Each is a
problem.

Where the node readiness controller's API is served, it names every NodeReadinessRule whose taint
key is readiness.k8s.io/node-ready or the agent's startup key: the rule adopts our taint, a problem
unless the agents run in publish mode, with the fixes (a key of the rule's own, or mode publish).

And it names every external name of the agents' dns check (agent.dns.externalNames, the webhook's
--check.dns.external-names) that does not resolve from the webhook's pod: a problem, since every
agent given it fails its dns check wherever the cluster answers as it does there. doctor resolves
nothing itself and execs nothing: the webhook resolves those names from its pod every minute and
records each outcome as an Event on the Pod (` + api.EventExternalNameUnresolved + `, ` + api.EventExternalNameResolved + `,
the name in the Event's action); doctor reads the newest of each name among the webhook's pods. Helm fixes name
the published chart (` + doctor.PublishedChart + `) at the version the
release deployed.

Exit status: 0 nothing wrong (advice may be printed), 1 a problem found, 3 something it needs could
not be read (the read is named; e.g. RBAC) and no problem found in the rest. -o json and -o yaml
print the same as a ` + DoctorKind + ` (apiVersion ` + ListAPIVersion + `).`,
	run: runDoctor,
}

// DoctorKind is the kind of doctor's -o json|yaml output.
const DoctorKind = "DoctorReport"

// exitStatus ends a command with code, msg on stderr.
type exitStatus struct {
	code int
	msg  string
}

func (e exitStatus) Error() string { return e.msg }

func runDoctor(ctx context.Context, inv *invocation) error {
	ns, fallback := "", inv.namespace
	if inv.explicit {
		ns, fallback = inv.namespace, ""
	}
	report := doctor.Examine(ctx, inv.api, ns, fallback)
	report.APIVersion, report.Kind = ListAPIVersion, DoctorKind
	if inv.opts.Output == OutputJSON || inv.opts.Output == OutputYAML {
		if err := printObject(inv.out, report, inv.opts.Output); err != nil {
			return err
		}
	} else {
		// The suspend switch, if on, before the report: it is why nothing
		// below leads to a re-taint or a replacement.
		on, unreadable := switchLines(ctx, inv)
		printWarnings(inv.err, unreadable)
		for _, l := range on {
			text.Printf(inv.out, "%s\n", l)
		}
		if err := doctor.Print(inv.out, report); err != nil {
			return err
		}
	}
	printWarnings(inv.err, report.Warnings)
	switch outcome, msg := report.Outcome(); outcome {
	case doctor.OutcomeProblems:
		return exitStatus{ExitError, msg}
	case doctor.OutcomeIncomplete:
		return exitStatus{ExitIncomplete, msg}
	}
	return nil
}
