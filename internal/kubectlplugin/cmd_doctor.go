package kubectlplugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
)

// doctorCommand is `kubectl node-ready doctor`.
var doctorCommand = &command{
	path: "doctor", usage: "[-o json|yaml]", flags: []string{"output"},
	outputs: []string{OutputJSON, OutputYAML},
	short:   "How the autoscalers treat our taints, what goes wrong and the exact fix",
	long: `Reads, read-only, what it can see of the cluster:

  - kube-node-ready's agent DaemonSet and webhook Deployment (pod labels app=` + agentApp + ` and
    app=` + webhookApp + `, in the namespace --namespace names, else in all namespaces):
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

// clusterAutoscalerFallback is where doctor looks for Cluster Autoscaler
// when listing Deployments in all namespaces is not allowed.
const clusterAutoscalerFallback = metav1.NamespaceSystem

// exitStatus ends a command with code, msg on stderr.
type exitStatus struct {
	code int
	msg  string
}

func (e exitStatus) Error() string { return e.msg }

// doctorRead is what doctor read of the cluster.
type doctorRead struct {
	daemonSets  []appsv1.DaemonSet
	deployments []appsv1.Deployment // our webhooks, beside the DaemonSets
	cas         []doctor.ClusterAutoscaler
	karpenter   bool
	pools       []doctor.NodePool
	// karpenters are the Karpenter controllers whose Deployments were
	// read, with their releases.
	karpenters []doctor.Karpenter
	poolsErr   string
	scope      string // where our objects were looked for
	// agentsRead says the agent DaemonSets could be listed: only then
	// does doctor say which taints no agent removes.
	agentsRead bool
	// nodes are every node, when they could be read; revisions the
	// ControllerRevisions of the agent DaemonSets' namespaces.
	nodes     []corev1.Node
	nodesRead bool
	revisions []appsv1.ControllerRevision
	// podEvents are the Events about Pods of each namespace holding a
	// webhook that resolves the agents' external names.
	podEvents map[string][]eventsv1.Event
	// rules are the NodeReadinessRules (doctor_nrc.go); rulesServed says
	// the API server serves them.
	rules       []ReadinessRule
	rulesServed bool
	// failed are reads that failed, in a person's words; warnings are
	// reads that fell back or values that could not be read.
	failed, warnings []string
}

func runDoctor(ctx context.Context, inv *invocation) error {
	r := readForDoctor(ctx, inv)
	report := diagnoseAll(r)
	report.Warnings = append(report.Warnings, missedWarnings(r.nodes)...)
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
			printf(inv.out, "%s\n", l)
		}
		if err := PrintDoctor(inv.out, report); err != nil {
			return err
		}
	}
	printWarnings(inv.err, report.Warnings)
	switch {
	case report.Problems > 0:
		return exitStatus{ExitError, fmt.Sprintf("doctor: %d %s found: see the fixes above", report.Problems, plural(report.Problems, "problem", "problems"))}
	case len(report.ReadErrors) > 0:
		return exitStatus{ExitIncomplete, "doctor: could not read what it needs: " + strings.Join(report.ReadErrors, "; ")}
	}
	return nil
}

// listFallback lists in namespace ns, or in all namespaces when ns is
// empty; when that is not allowed, in fallback, saying so in r.
func listFallback[T any](ctx context.Context, r *doctorRead, ns, fallback, what string, list func(context.Context, string) ([]T, error)) ([]T, string, error) {
	items, err := list(ctx, ns)
	if apierrors.IsForbidden(err) && ns == "" && fallback != "" {
		r.warnings = append(r.warnings, fmt.Sprintf("%v; looked for %s in namespace %s only", err, what, fallback))
		items, err = list(ctx, fallback)
		ns = fallback
	}
	return items, ns, err
}

// readForDoctor reads our workloads, the Cluster Autoscaler Deployments and
// Karpenter's NodePools; a failed read is recorded, the others still run.
func readForDoctor(ctx context.Context, inv *invocation) *doctorRead {
	r := &doctorRead{}
	ns, fallback := "", inv.namespace
	if inv.explicit {
		ns, fallback = inv.namespace, ""
	}
	r.readAgents(ctx, inv.api, ns, fallback)
	r.readDeployments(ctx, inv.api, ns)
	r.readNodes(ctx, inv.api)
	r.readExternalNames(ctx, inv.api)
	var err error
	r.pools, r.karpenter, err = inv.api.ListNodePools(ctx)
	if err != nil {
		r.failed = append(r.failed, err.Error())
		r.poolsErr = err.Error()
	}
	slices.SortFunc(r.pools, func(a, b doctor.NodePool) int { return strings.Compare(a.Name, b.Name) })
	r.readRules(ctx, inv.api)
	// Whether a key under readiness.k8s.io/ is startup depends on the
	// release of the Karpenter that runs the pools: the oldest one found
	// (or none visible, version unknown) decides.
	k := doctor.Oldest(r.karpenters)
	for i := range r.pools {
		r.pools[i].Karpenter = k
	}
	return r
}

// readAgents finds our agent DaemonSets in namespace ns ("" for all, then
// fallback when that is not allowed).
func (r *doctorRead) readAgents(ctx context.Context, a API, ns, fallback string) {
	dss, in, err := listFallback(ctx, r, ns, fallback, "kube-node-ready", a.ListDaemonSets)
	r.scope = scopeName(in)
	if err != nil {
		r.failed = append(r.failed, err.Error())
		return
	}
	r.agentsRead = true
	for _, ds := range dss {
		if isOurs(ds.Spec.Template, agentApp) {
			r.daemonSets = append(r.daemonSets, ds)
		}
	}
	if len(r.daemonSets) == 0 {
		r.failed = append(r.failed, fmt.Sprintf("no kube-node-ready agent DaemonSet (pod label app=%s) in %s: pass --namespace", agentApp, r.scope))
	}
}

// readNodes reads every node, for the taints no agent removes, and the
// agent DaemonSets' earlier revisions, for the keys they wrote. A node
// list that fails is a failed read; revisions that cannot be read leave
// only the presets' and the running configuration's keys, with a warning.
func (r *doctorRead) readNodes(ctx context.Context, a API) {
	nodes, err := a.ListNodes(ctx, "")
	if err != nil {
		r.failed = append(r.failed, err.Error())
	} else {
		r.nodes, r.nodesRead = nodes, true
	}
	for _, ns := range agentNamespaces(r.daemonSets) {
		revs, err := a.ListControllerRevisions(ctx, ns)
		if err != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("%v: keys of earlier agent configurations are not recognized as ours", err))
			continue
		}
		r.revisions = append(r.revisions, revs...)
	}
}

// readDeployments finds the Cluster Autoscalers and Karpenter controllers
// in every namespace (in kube-system when that is not allowed) and our
// webhooks in namespace ns ("" for all) and beside each agent.
func (r *doctorRead) readDeployments(ctx context.Context, a API, ns string) {
	deps, depsIn, err := listFallback(ctx, r, "", clusterAutoscalerFallback, "Cluster Autoscaler", a.ListDeployments)
	if err != nil {
		r.failed = append(r.failed, err.Error())
	}
	for i := range deps {
		c, ok, err := readClusterAutoscaler(&deps[i])
		if err != nil {
			r.warnings = append(r.warnings, err.Error())
		}
		if ok {
			r.cas = append(r.cas, c)
		}
		if k, ok := readKarpenter(&deps[i]); ok {
			r.karpenters = append(r.karpenters, k)
		}
	}
	r.addWebhooks(deps, ns)
	for _, agentNS := range agentNamespaces(r.daemonSets) {
		if depsIn == "" || depsIn == agentNS {
			continue // the list above covered it
		}
		mine, err := a.ListDeployments(ctx, agentNS)
		if err != nil {
			r.failed = append(r.failed, err.Error())
		}
		r.addWebhooks(mine, agentNS)
	}
}

// addWebhooks keeps our webhook Deployments of deps in namespace ns ("" for all).
func (r *doctorRead) addWebhooks(deps []appsv1.Deployment, ns string) {
	for _, d := range deps {
		if (ns == "" || d.Namespace == ns) && isOurs(d.Spec.Template, webhookApp) {
			r.deployments = append(r.deployments, d)
		}
	}
}

// agentNamespaces are the namespaces of the agent DaemonSets, each once.
func agentNamespaces(dss []appsv1.DaemonSet) []string {
	var out []string
	for _, ds := range dss {
		if !slices.Contains(out, ds.Namespace) {
			out = append(out, ds.Namespace)
		}
	}
	return out
}

func scopeName(ns string) string {
	if ns == "" {
		return "all namespaces"
	}
	return "namespace " + ns
}

// diagnoseAll diagnoses each installation found, or the chart's defaults
// when none was.
func diagnoseAll(r *doctorRead) DoctorReport {
	rep := DoctorReport{APIVersion: ListAPIVersion, Kind: DoctorKind, ReadErrors: r.failed,
		Karpenter: KarpenterView{Installed: r.karpenter, ReadError: r.poolsErr, Controllers: r.karpenters}}
	for _, c := range r.cas {
		rep.ClusterAutoscalers = append(rep.ClusterAutoscalers, caView(c))
	}
	for _, p := range r.pools {
		rep.Karpenter.NodePools = append(rep.Karpenter.NodePools, p.Name)
	}
	installs, assumed, warnings := installsOf(r)
	for _, in := range installs {
		d := doctor.Diagnose(doctor.Setup{Install: in, ClusterAutoscalers: r.cas, Karpenter: r.karpenter, NodePools: r.pools})
		if assumed {
			// Keys nobody deploys are no problem: say what they would be.
			for i := range d.Findings {
				d.Findings[i].Severity = doctor.Advice
			}
		}
		view := installView(in, d)
		if in.ReverifyAfterReboot {
			view.HeldAfterReboot = heldAfterReboot(r.nodes)
		}
		rep.Installs = append(rep.Installs, view)
		rep.Problems += d.Problems()
	}
	rep.ReadinessRules = ruleFindings(r.rules, installs)
	for _, f := range rep.ReadinessRules {
		if f.Severity == doctor.Problem {
			rep.Problems++
		}
	}
	rep.Warnings = append(r.warnings, warnings...)
	rep.StrandedTaints = []StrandedTaint{}
	rep.HeldFinalizers = []HeldFinalizer{}
	if r.agentsRead && r.nodesRead {
		rep.StrandedTaints = strandedTaints(r.nodes, knownKeysOf(r), ownersOf(r))
		rep.Problems += len(rep.StrandedTaints)
		rep.HeldFinalizers = heldFinalizers(r.nodes, r.deployments)
		rep.Problems += len(rep.HeldFinalizers)
	}
	rep.UnresolvedExternalNames = unresolvedNames(r.deployments, r.podEvents)
	rep.Problems += len(rep.UnresolvedExternalNames)
	return rep
}

// ownersOf are the running agents, each with the keys it removes.
func ownersOf(r *doctorRead) []agentOwner {
	var owners []agentOwner
	for i := range r.daemonSets {
		ds := &r.daemonSets[i]
		if len(ds.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		in, _ := readAgent(ds) // warned about by installsOf
		owners = append(owners, readOwner(agentContainer(ds.Spec.Template), in))
	}
	return owners
}

// knownKeysOf are the taint keys of ours: every preset's, the running
// agents' and webhooks', and those of the agents' earlier revisions.
func knownKeysOf(r *doctorRead) *knownKeys {
	k := presetKeys()
	for i := range r.daemonSets {
		ds := &r.daemonSets[i]
		if len(ds.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		in, _ := readAgent(ds)
		o := readOwner(agentContainer(ds.Spec.Template), in)
		k.addAgent(o.startup, o.unhealthy, o.previous, "the flags of "+in.Agent)
	}
	for i := range r.deployments {
		d := &r.deployments[i]
		if len(d.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		who := "Deployment " + d.Namespace + "/" + d.Name
		c := d.Spec.Template.Spec.Containers[0]
		keys, set, _ := readContainerTaintKeys(c, api.WebhookEnvPrefix, who, api.AgentStartupTaintFlag, api.AgentUnhealthyTaintFlag)
		if set {
			v, _, _ := setting(c, api.WebhookEnvPrefix, "", api.PreviousTaintKeysFlag)
			var previous flagenv.StringList
			_ = previous.Set(v)
			k.addAgent(keys.Startup, keys.Unhealthy, previous, "the flags of "+who)
		}
	}
	for i := range r.revisions {
		rev := &r.revisions[i]
		for j := range r.daemonSets {
			ds := &r.daemonSets[j]
			t, ok := revisionTemplate(rev)
			if !ok || !revisionOf(rev, ds) {
				continue
			}
			in := doctor.Install{Agent: fmt.Sprintf("DaemonSet %s/%s revision %d", ds.Namespace, ds.Name, rev.Revision)}
			o := readOwner(agentContainer(t), in)
			k.addAgent(o.startup, o.unhealthy, o.previous, "revision "+fmt.Sprint(rev.Revision)+" of DaemonSet "+ds.Namespace+"/"+ds.Name)
		}
	}
	return k
}

// installsOf are the installations read: each agent DaemonSet with its
// webhook; a webhook without an agent with the keys it watches; else the
// chart's default keys, assumed.
func installsOf(r *doctorRead) (installs []doctor.Install, assumed bool, warnings []string) {
	paired := map[string]bool{}
	for i := range r.daemonSets {
		in, w := readAgent(&r.daemonSets[i])
		warnings = append(warnings, w...)
		if d := webhookOf(&r.daemonSets[i], r.deployments); d != nil {
			paired[d.Namespace+"/"+d.Name] = true
			keys, w := readWebhook(&in, d)
			warnings = append(warnings, w...)
			if m := keyMismatch(in, keys); m != "" {
				warnings = append(warnings, m)
			}
		}
		installs = append(installs, in)
	}
	for i := range r.deployments {
		d := &r.deployments[i]
		if paired[d.Namespace+"/"+d.Name] {
			continue
		}
		in := doctor.Install{Namespace: d.Namespace, Agent: "no agent DaemonSet found: keys from the webhook's flags"}
		helmRelease(&in, d.Labels)
		keys, w := readWebhook(&in, d)
		warnings = append(warnings, w...)
		if keys.set {
			in.Startup, in.Unhealthy = keys.startup, keys.unhealthy
			installs = append(installs, in)
		}
	}
	if len(installs) > 0 {
		return installs, false, warnings
	}
	s, _ := doctor.ParseTaint(api.Default().StartupTaint())
	u, _ := doctor.ParseTaint(api.Default().UnhealthyTaint())
	return []doctor.Install{{Agent: "none found: the chart's default keys assumed", Startup: s, Unhealthy: u}}, true, warnings
}
