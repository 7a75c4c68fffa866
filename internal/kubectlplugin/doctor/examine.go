package doctor

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
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// clusterAutoscalerFallback is where doctor looks for Cluster Autoscaler
// when listing Deployments in all namespaces is not allowed.
const clusterAutoscalerFallback = metav1.NamespaceSystem

// snapshot is what doctor read of the cluster.
type snapshot struct {
	daemonSets  []appsv1.DaemonSet
	deployments []appsv1.Deployment // our webhooks, beside the DaemonSets
	cas         []ClusterAutoscaler
	karpenter   bool
	pools       []NodePool
	// karpenters are the Karpenter controllers whose Deployments were
	// read, with their releases.
	karpenters []Karpenter
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
	// rules are the NodeReadinessRules (readinessrules.go); rulesServed says
	// the API server serves them.
	rules       []ReadinessRule
	rulesServed bool
	// failed are reads that failed, in a person's words; warnings are
	// reads that fell back or values that could not be read.
	failed, warnings []string
}

// Cluster is what doctor reads of the cluster; its errors already say what
// failed in a person's words ("not allowed to list ...").
type Cluster interface {
	// ListNodes reads the Nodes matching a label selector ("" for all).
	ListNodes(ctx context.Context, selector string) ([]corev1.Node, error)
	// ListPodEvents reads the events.k8s.io/v1 Events about Pods in namespace.
	ListPodEvents(ctx context.Context, namespace string) ([]eventsv1.Event, error)
	// ListDaemonSets reads the DaemonSets in namespace ("" for all).
	ListDaemonSets(ctx context.Context, namespace string) ([]appsv1.DaemonSet, error)
	// ListDeployments reads the Deployments in namespace ("" for all).
	ListDeployments(ctx context.Context, namespace string) ([]appsv1.Deployment, error)
	// ListControllerRevisions reads the ControllerRevisions in namespace:
	// the earlier pod templates of its DaemonSets.
	ListControllerRevisions(ctx context.Context, namespace string) ([]appsv1.ControllerRevision, error)
	// ListNodePools reads Karpenter's NodePools; served is false when the
	// API server does not serve karpenter.sh/v1 NodePools.
	ListNodePools(ctx context.Context) (pools []NodePool, served bool, err error)
	// ListNodeReadinessRules reads the node readiness controller's rules;
	// served is false when the API server does not serve them.
	ListNodeReadinessRules(ctx context.Context) (rules []ReadinessRule, served bool, err error)
}

// Examine reads what doctor needs of the cluster and diagnoses it: our
// workloads in namespace ns ("" for all namespaces, then fallback when
// that is not allowed), the Cluster Autoscaler Deployments, Karpenter's
// NodePools, the nodes. A failed read is recorded in the report, the
// others still run. The caller sets the report's APIVersion and Kind.
func Examine(ctx context.Context, c Cluster, ns, fallback string) Report {
	r := read(ctx, c, ns, fallback)
	report := diagnoseAll(r)
	report.Warnings = append(report.Warnings, MissedAdmission(r.nodes)...)
	return report
}

// ListFallback lists in namespace ns, or in all namespaces when ns is
// empty; when that is not allowed, in fallback, saying so in warning.
// in is where it listed; what names what was looked for.
func ListFallback[T any](ctx context.Context, ns, fallback, what string, list func(context.Context, string) ([]T, error)) (items []T, in, warning string, err error) {
	items, err = list(ctx, ns)
	if apierrors.IsForbidden(err) && ns == "" && fallback != "" {
		warning = fmt.Sprintf("%v; looked for %s in namespace %s only", err, what, fallback)
		items, err = list(ctx, fallback)
		ns = fallback
	}
	return items, ns, warning, err
}

// listFallback is ListFallback with the warning kept in r.
func listFallback[T any](ctx context.Context, r *snapshot, ns, fallback, what string, list func(context.Context, string) ([]T, error)) ([]T, string, error) {
	items, in, warning, err := ListFallback(ctx, ns, fallback, what, list)
	if warning != "" {
		r.warnings = append(r.warnings, warning)
	}
	return items, in, err
}

// read reads our workloads, the Cluster Autoscaler Deployments and
// Karpenter's NodePools; a failed read is recorded, the others still run.
func read(ctx context.Context, a Cluster, ns, fallback string) *snapshot {
	r := &snapshot{}
	r.readAgents(ctx, a, ns, fallback)
	r.readDeployments(ctx, a, ns)
	r.readNodes(ctx, a)
	r.readExternalNames(ctx, a)
	var err error
	r.pools, r.karpenter, err = a.ListNodePools(ctx)
	if err != nil {
		r.failed = append(r.failed, err.Error())
		r.poolsErr = err.Error()
	}
	slices.SortFunc(r.pools, func(a, b NodePool) int { return strings.Compare(a.Name, b.Name) })
	r.readRules(ctx, a)
	// Whether a key under readiness.k8s.io/ is startup depends on the
	// release of the Karpenter that runs the pools: the oldest one found
	// (or none visible, version unknown) decides.
	k := Oldest(r.karpenters)
	for i := range r.pools {
		r.pools[i].Karpenter = k
	}
	return r
}

// readAgents finds our agent DaemonSets in namespace ns ("" for all, then
// fallback when that is not allowed).
func (r *snapshot) readAgents(ctx context.Context, a Cluster, ns, fallback string) {
	dss, in, err := listFallback(ctx, r, ns, fallback, "kube-node-ready", a.ListDaemonSets)
	r.scope = ScopeName(in)
	if err != nil {
		r.failed = append(r.failed, err.Error())
		return
	}
	r.agentsRead = true
	for _, ds := range dss {
		if IsOurs(ds.Spec.Template, AgentApp) {
			r.daemonSets = append(r.daemonSets, ds)
		}
	}
	if len(r.daemonSets) == 0 {
		r.failed = append(r.failed, fmt.Sprintf("no kube-node-ready agent DaemonSet (pod label app=%s) in %s: pass --namespace", AgentApp, r.scope))
	}
}

// readNodes reads every node, for the taints no agent removes, and the
// agent DaemonSets' earlier revisions, for the keys they wrote. A node
// list that fails is a failed read; revisions that cannot be read leave
// only the presets' and the running configuration's keys, with a warning.
func (r *snapshot) readNodes(ctx context.Context, a Cluster) {
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
func (r *snapshot) readDeployments(ctx context.Context, a Cluster, ns string) {
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
func (r *snapshot) addWebhooks(deps []appsv1.Deployment, ns string) {
	for _, d := range deps {
		if (ns == "" || d.Namespace == ns) && IsOurs(d.Spec.Template, WebhookApp) {
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

// ScopeName names where a list looked: "all namespaces" for "", else
// "namespace ns".
func ScopeName(ns string) string {
	if ns == "" {
		return "all namespaces"
	}
	return "namespace " + ns
}

// diagnoseAll diagnoses each installation found, or the chart's defaults
// when none was.
func diagnoseAll(r *snapshot) Report {
	rep := Report{ReadErrors: r.failed,
		Karpenter: KarpenterView{Installed: r.karpenter, ReadError: r.poolsErr, Controllers: r.karpenters}}
	for _, c := range r.cas {
		rep.ClusterAutoscalers = append(rep.ClusterAutoscalers, caView(c))
	}
	for _, p := range r.pools {
		rep.Karpenter.NodePools = append(rep.Karpenter.NodePools, p.Name)
	}
	installs, assumed, warnings := installsOf(r)
	for _, in := range installs {
		d := Diagnose(Setup{Install: in, ClusterAutoscalers: r.cas, Karpenter: r.karpenter, NodePools: r.pools})
		if assumed {
			// Keys nobody deploys are no problem: say what they would be.
			for i := range d.Findings {
				d.Findings[i].Severity = Advice
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
		if f.Severity == Problem {
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
func ownersOf(r *snapshot) []agentOwner {
	var owners []agentOwner
	for i := range r.daemonSets {
		ds := &r.daemonSets[i]
		if len(ds.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		in, _ := readAgent(ds) // warned about by installsOf
		owners = append(owners, readOwner(AgentContainer(ds.Spec.Template), in))
	}
	return owners
}

// knownKeysOf are the taint keys of ours: every preset's, the running
// agents' and webhooks', and those of the agents' earlier revisions.
func knownKeysOf(r *snapshot) *knownKeys {
	k := presetKeys()
	for i := range r.daemonSets {
		ds := &r.daemonSets[i]
		if len(ds.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		in, _ := readAgent(ds)
		o := readOwner(AgentContainer(ds.Spec.Template), in)
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
			v, _, _ := Setting(c, api.WebhookEnvPrefix, "", api.PreviousTaintKeysFlag)
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
			in := Install{Agent: fmt.Sprintf("DaemonSet %s/%s revision %d", ds.Namespace, ds.Name, rev.Revision)}
			o := readOwner(AgentContainer(t), in)
			k.addAgent(o.startup, o.unhealthy, o.previous, "revision "+fmt.Sprint(rev.Revision)+" of DaemonSet "+ds.Namespace+"/"+ds.Name)
		}
	}
	return k
}

// installsOf are the installations read: each agent DaemonSet with its
// webhook; a webhook without an agent with the keys it watches; else the
// chart's default keys, assumed.
func installsOf(r *snapshot) (installs []Install, assumed bool, warnings []string) {
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
		in := Install{Namespace: d.Namespace, Agent: "no agent DaemonSet found: keys from the webhook's flags"}
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
	s, _ := ParseTaint(api.Default().StartupTaint())
	u, _ := ParseTaint(api.Default().UnhealthyTaint())
	return []Install{{Agent: "none found: the chart's default keys assumed", Startup: s, Unhealthy: u}}, true, warnings
}

// Outcome is doctor's verdict on what it read.
type Outcome int

// Outcomes, from best to worst as the exit status orders them.
const (
	// OutcomeOK: nothing wrong found (advice may be printed).
	OutcomeOK Outcome = iota
	// OutcomeProblems: at least one finding is a problem.
	OutcomeProblems
	// OutcomeIncomplete: no problem in what was read, but a read doctor
	// needs failed.
	OutcomeIncomplete
)

// Outcome is rep's verdict and the line that says it ("" when OK).
func (rep *Report) Outcome() (Outcome, string) {
	switch {
	case rep.Problems > 0:
		return OutcomeProblems, fmt.Sprintf("doctor: %d %s found: see the fixes above", rep.Problems, text.Plural(rep.Problems, "problem", "problems"))
	case len(rep.ReadErrors) > 0:
		return OutcomeIncomplete, "doctor: could not read what it needs: " + strings.Join(rep.ReadErrors, "; ")
	}
	return OutcomeOK, ""
}
