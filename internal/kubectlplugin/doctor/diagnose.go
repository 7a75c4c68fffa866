package doctor

import (
	"fmt"
	"strings"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Install is one kube-node-ready installation as its workloads are
// deployed: the agent's taints and the webhook's deadline.
type Install struct {
	// Namespace is the agent DaemonSet's.
	Namespace string `json:"namespace"`
	// Release is its Helm release; empty when Helm did not install it.
	Release string `json:"release,omitempty"`
	// ChartVersion is the version of the chart the release deployed, from
	// its workloads' labels (helm.sh/chart, app.kubernetes.io/version);
	// empty when they do not say.
	ChartVersion string `json:"chartVersion,omitempty"`
	// Agent names the agent's DaemonSet ("DaemonSet ns/name").
	Agent string `json:"agent"`
	// Startup is the agent's --startup-taint.
	Startup Taint `json:"startupTaint"`
	// Unhealthy is the agent's --unhealthy-taint.
	Unhealthy Taint `json:"unhealthyTaint"`
	// Webhook names the webhook's Deployment; empty when none was found.
	Webhook string `json:"webhook,omitempty"`
	// Remediation is the webhook's --remediation: off (or empty), report
	// or replace.
	Remediation string `json:"remediation,omitempty"`
	// UnverifiedDeadline is the webhook's --unverified-deadline, after
	// which remediation acts on a node still unverified.
	UnverifiedDeadline time.Duration `json:"-"`
	// InjectsReadinessKey says the webhook adds the startup taint at Node
	// creation (--inject-startup-taint) and, on a node Karpenter launched
	// whose NodePool declares none of our keys, readiness.k8s.io/node-ready
	// (--karpenter-readiness-keys): such a NodePool's nodes start tainted
	// with a key Karpenter waits for, whatever the agent's own key.
	InjectsReadinessKey bool `json:"injectsReadinessKey,omitempty"`
	// Mode is the agent's --mode when it is not enforce (observe,
	// publish); empty for enforce.
	Mode string `json:"mode,omitempty"`
	// ReverifyAfterReboot is the agent's --reverify-after-reboot.
	ReverifyAfterReboot bool `json:"reverifyAfterReboot,omitempty"`
}

// taint is the installation's taint of role.
func (in Install) taint(r Role) Taint {
	if r == RoleUnhealthy {
		return in.Unhealthy
	}
	return in.Startup
}

// Setup is what the doctor could see of a cluster, for one installation.
type Setup struct {
	Install Install
	// ClusterAutoscalers are the Cluster Autoscalers whose Deployments
	// were read. None, without Karpenter, is checked as a managed Cluster
	// Autoscaler would be (reserved prefixes only), as advice.
	ClusterAutoscalers []ClusterAutoscaler
	// Karpenter says whether the API server serves Karpenter's NodePools.
	Karpenter bool
	// NodePools are Karpenter's NodePools.
	NodePools []NodePool
}

// Treatment is how one autoscaler treats a node carrying one of our taints.
type Treatment struct {
	Role       Role   `json:"role"`
	Key        string `json:"key"`
	Autoscaler string `json:"autoscaler"`
	Class      Class  `json:"class"`
	// Rule is what decides the class: a flag, a prefix, a NodePool field.
	Rule string `json:"rule"`
}

// Severity says whether a finding makes the doctor fail.
type Severity string

const (
	// Problem: an autoscaler will over-scale, under-scale or give up on
	// nodes; the doctor exits non-zero.
	Problem Severity = "problem"
	// Advice: works today, but a change is recommended.
	Advice Severity = "advice"
)

// Finding is something that goes wrong, and the changes that fix it.
type Finding struct {
	Severity   Severity `json:"severity"`
	Autoscaler string   `json:"autoscaler"`
	Role       Role     `json:"role"`
	Key        string   `json:"key"`
	// Summary names the harm in a few words: "over-scale, template poisoning".
	Summary string `json:"summary"`
	// Detail says what the autoscaler does and why.
	Detail string `json:"detail"`
	// Fixes are alternative changes, each enough on its own.
	Fixes []string `json:"fixes"`
}

// Diagnosis is what Diagnose found.
type Diagnosis struct {
	Treatments []Treatment `json:"treatments"`
	Findings   []Finding   `json:"findings"`
}

// Problems counts the findings of severity Problem.
func (d Diagnosis) Problems() int {
	n := 0
	for _, f := range d.Findings {
		if f.Severity == Problem {
			n++
		}
	}
	return n
}

// Diagnose says how each autoscaler of s treats our taints and what goes
// wrong, Cluster Autoscalers first, then NodePools in the given order.
func Diagnose(s Setup) Diagnosis {
	var d Diagnosis
	cas, managed := s.ClusterAutoscalers, false
	if len(cas) == 0 && !s.Karpenter {
		cas, managed = []ClusterAutoscaler{{MaxNodeProvisionTime: DefaultMaxNodeTime, MaxNodeStartupTime: DefaultMaxNodeTime}}, true
	}
	for _, c := range cas {
		for _, r := range []Role{RoleStartup, RoleUnhealthy} {
			d.clusterAutoscaler(s.Install, c, r, managed)
		}
		d.deadline(s.Install, c, managed)
	}
	for _, p := range s.NodePools {
		for _, r := range []Role{RoleStartup, RoleUnhealthy} {
			t := s.Install.taint(r)
			class, rule := p.Classify(t)
			if r == RoleUnhealthy && class == Permanent {
				rule = "on an initialized node every taint counts, so its capacity is replaced (as it should)"
			}
			d.Treatments = append(d.Treatments, Treatment{Role: r, Key: t.Key, Autoscaler: "Karpenter " + p.Ref(), Class: class, Rule: rule})
		}
		d.nodePool(s.Install, p, len(s.ClusterAutoscalers) > 0)
	}
	return d
}

// add records a finding about autoscaler and our taint of role.
func (d *Diagnosis) add(sev Severity, autoscaler string, in Install, r Role, summary, detail string, fixes ...string) {
	d.Findings = append(d.Findings, Finding{Severity: sev, Autoscaler: autoscaler, Role: r, Key: in.taint(r).Key,
		Summary: summary, Detail: detail, Fixes: fixes})
}

// clusterAutoscaler classifies our taint of role for c and records what
// goes wrong. For a managed Cluster Autoscaler (none visible) only the
// reserved prefixes work, and it may not exist: its findings are advice.
func (d *Diagnosis) clusterAutoscaler(in Install, c ClusterAutoscaler, r Role, managed bool) {
	key := in.taint(r).Key
	class, rule := c.Classify(key)
	d.Treatments = append(d.Treatments, Treatment{Role: r, Key: key, Autoscaler: "Cluster Autoscaler " + c.Ref(), Class: class, Rule: rule})
	if r == RoleUnhealthy && key == in.Startup.Key {
		d.sameKey(in, c, class, managed)
		return
	}
	want, flag := Startup, "--startup-taint="+key
	if r == RoleUnhealthy {
		want, flag = Status, "--status-taint="+key
	}
	if class == want {
		return
	}
	summary, detail := caHarm(c, r, class)
	if v := fullTaintFlag(c, key); v != "" {
		detail += " Its flags name " + v + ", but Cluster Autoscaler takes a taint's key alone there, so that names no taint of ours."
	}
	preset := presetFix(in, api.PresetClusterAutoscaler)
	if managed {
		d.add(Advice, "Cluster Autoscaler "+c.Ref(), in, r, summary,
			"No Cluster Autoscaler Deployment is visible. If a managed one scales this cluster (GKE, AKS: its flags cannot be set), "+
				"only its reserved prefixes work and it treats "+key+" as "+string(class)+". "+detail, preset)
		return
	}
	var fixes []string
	switch {
	case class != Startup:
		// CA checks startup keys first: adding one outranks a status rule.
		fixes = append(fixes, caFlagFix(c, flag))
	case rule == "--startup-taint":
		fixes = append(fixes, "take "+key+" out of --startup-taint and --ignore-taint in Cluster Autoscaler's flags ("+
			c.Ref()+") and add "+flag)
	}
	if presetTaint(api.PresetClusterAutoscaler, r).Key != key {
		fixes = append(fixes, preset)
	}
	d.add(Problem, "Cluster Autoscaler "+c.Ref(), in, r, summary, detail, fixes...)
}

// sameKey advises on an agent that re-taints with its startup key (a
// documented choice): Cluster Autoscaler then takes a re-tainted node for
// one still starting. When CA does not treat the key as startup, the
// startup key's own finding already says so.
func (d *Diagnosis) sameKey(in Install, c ClusterAutoscaler, class Class, managed bool) {
	if class != Startup || managed {
		return
	}
	_, detail := caHarm(c, RoleUnhealthy, Startup)
	fix := "re-taint with a status key: the agent's --unhealthy-taint=" + presetTaint(api.PresetClusterAutoscaler, RoleUnhealthy).String() +
		" (and the webhook's --agent-unhealthy-taint)"
	if in.Release != "" {
		fix = "re-taint with a status key: " + HelmUpgrade(in, "agent.retaintTaint.key="+presetTaint(api.PresetClusterAutoscaler, RoleUnhealthy).Key)
	}
	d.add(Advice, "Cluster Autoscaler "+c.Ref(), in, RoleUnhealthy, "re-taints with the startup key",
		"The agent re-taints unhealthy nodes with its startup key. "+detail, fix)
}

// caHarm is what Cluster Autoscaler c does wrong with our taint of role
// when it treats it as class: a few words, and why.
func caHarm(c ClusterAutoscaler, r Role, class Class) (summary, detail string) {
	switch {
	case r == RoleStartup && class == Unknown:
		summary = "over-scale, template poisoning"
		detail = "Cluster Autoscaler counts a node being verified as Ready capacity that the pending pods do not fit on, " +
			"so it scales the group up again on every loop while the agent verifies (over-scale); and a tainted node that has " +
			"been Ready for a minute can become its group's template, after which it believes every new node of the group " +
			"carries the taint and stops scaling the group up for pods that do not tolerate it (template poisoning)."
	case r == RoleStartup:
		summary = "wrong class: status"
		detail = "Cluster Autoscaler counts a node being verified as Ready capacity that is lost, and scales up to replace it: " +
			"one extra node for every node being verified."
	case class == Unknown:
		summary = "template poisoning, capacity not replaced"
		detail = "A re-tainted node is Ready and schedulable, so it can become its group's template; Cluster Autoscaler strips only " +
			"startup, status and condition taints from a template, so it then believes every new node of the group is tainted " +
			"and stops scaling the group up: the lost capacity is not replaced. As a status taint it is stripped from templates " +
			"and the re-tainted node's capacity is replaced."
	default:
		summary = "wrong class: startup"
		detail = fmt.Sprintf("Cluster Autoscaler counts a re-tainted node as not started; older than --max-node-startup-time (%s) "+
			"it counts as Unready: it may delete it after --scale-down-unready-time, and halts all autoscaling once unready "+
			"nodes exceed max(3, 45%%).", ShortDuration(c.MaxNodeStartupTime))
	}
	return summary, detail
}

// fullTaintFlag is a value of c's taint flags that writes key as a whole
// taint (key=value:Effect), which CA reads as a key that never matches; ""
// when there is none.
func fullTaintFlag(c ClusterAutoscaler, key string) string {
	for _, v := range append(append([]string(nil), c.StartupTaints...), c.StatusTaints...) {
		if strings.HasPrefix(v, key+"=") || strings.HasPrefix(v, key+":") {
			return v
		}
	}
	return ""
}

// deadline compares the webhook's --unverified-deadline with the times
// after which Cluster Autoscaler gives up on a node it scaled up.
func (d *Diagnosis) deadline(in Install, c ClusterAutoscaler, managed bool) {
	if in.Remediation == "" || in.Remediation == "off" || in.UnverifiedDeadline <= 0 {
		return
	}
	limit := min(c.MaxNodeProvisionTime, c.MaxNodeStartupTime)
	if in.UnverifiedDeadline <= limit {
		return
	}
	sev, who := Problem, "Cluster Autoscaler "+c.Ref()
	if managed {
		sev = Advice
	}
	detail := fmt.Sprintf("The webhook acts on a node still unverified only after --unverified-deadline=%s (--remediation=%s), "+
		"but Cluster Autoscaler gives up sooner: after --max-node-startup-time=%s it counts the node Unready, and a scale-up "+
		"still open after --max-node-provision-time=%s is timed out and its node group backed off (5 to 30 min).",
		ShortDuration(in.UnverifiedDeadline), in.Remediation, ShortDuration(c.MaxNodeStartupTime), ShortDuration(c.MaxNodeProvisionTime))
	fixes := []string{deadlineFix(in, limit)}
	if !managed {
		raise := ShortDuration(in.UnverifiedDeadline + 5*time.Minute)
		fixes = append(fixes, caFlagFix(c, "--max-node-provision-time="+raise, "--max-node-startup-time="+raise))
	}
	d.add(sev, who, in, RoleStartup, "held past Cluster Autoscaler's deadline", detail, fixes...)
}

// nodePool records what goes wrong with our startup taint on the nodes of
// p. withCA says a Cluster Autoscaler is present too, so the fixes keep to
// the NodePool instead of switching presets.
func (d *Diagnosis) nodePool(in Install, p NodePool, withCA bool) {
	who, t := "Karpenter "+p.Ref(), in.Startup
	class, rule := p.Classify(t)
	var fixes []string
	if !withCA && t.Key != presetTaint(api.PresetKarpenter, RoleStartup).Key {
		fixes = append(fixes, presetFix(in, api.PresetKarpenter))
	}
	old := d.previousKey(in, p)
	undeclared := class == Permanent || rule != "spec.template.spec.startupTaints"
	switch {
	case index(p.Taints, t.Key) >= 0:
		d.add(Problem, who, in, RoleStartup, "declared permanent",
			"spec.template.spec.taints lists "+t.Key+": Karpenter creates every node of this NodePool with it and takes it to "+
				"stay, so pods that do not tolerate it are never provisioned on this NodePool, and while the agent holds a node "+
				"Karpenter launches more for the same pods.",
			startupTaintFix(p, t, ""))
	case old != "":
		fix := startupTaintFix(p, t, old)
		if class == Startup && rule == "spec.template.spec.startupTaints" {
			fix = removeStartupTaintFix(p, old)
		}
		d.add(Advice, who, in, RoleStartup, "previous key declared",
			"spec.template.spec.startupTaints lists "+old+", a key of an earlier kube-node-ready configuration, while the agent "+
				"uses "+t.Key+". It still works (the agent removes previous keys), but new nodes should start with the current one.",
			fix)
	case undeclared && in.InjectsReadinessKey && index(p.StartupTaints, t.Key) < 0:
		// The webhook gives this NodePool's new nodes a readiness.k8s.io/
		// key at creation, never t: nothing to fix where Karpenter ignores
		// that prefix.
		d.injectedReadinessKey(in, p, t)
	case class == Permanent:
		detail := "Karpenter takes a taint that is not in spec.template.spec.startupTaints (nor, from v" + KarpenterReadinessSince +
			", under " + KarpenterEphemeralPrefix + ") to stay: while the agent holds a new node, the pending pods are taken not to fit on it " +
			"and Karpenter launches one more NodeClaim every 10 s for the same pods (13 NodeClaims in 2 minutes measured)."
		if i := index(p.StartupTaints, t.Key); i >= 0 {
			detail += " startupTaints lists " + t.Key + " with effect " + p.StartupTaints[i].Effect + ", and Karpenter matches key and effect."
		}
		sev := Problem
		if strings.HasPrefix(t.Key, KarpenterEphemeralPrefix) {
			detail += " " + p.Karpenter.readinessDetail()
			fixes = append(fixes, upgradeKarpenterFix)
			sev = p.Karpenter.readinessSeverity()
		}
		d.add(sev, who, in, RoleStartup, "runaway launches", detail, append([]string{startupTaintFix(p, t, "")}, fixes...)...)
	case rule != "spec.template.spec.startupTaints":
		d.add(Advice, who, in, RoleStartup, "not put on new nodes by Karpenter",
			"Karpenter ignores "+t.Key+" until a node is initialized ("+rule+"), but puts it on new nodes only when "+
				"spec.template.spec.startupTaints lists it: unless the nodes' kubelet registers with it, new nodes start "+
				"without it and workloads land before the agent verified them.",
			startupTaintFix(p, t, ""))
	}
}

// previousKey is a key of ours, other than the installation's current
// ones, that p's startupTaints list; "" when none.
func (d *Diagnosis) previousKey(in Install, p NodePool) string {
	for _, key := range ourKeys() {
		if key != in.Startup.Key && key != in.Unhealthy.Key && index(p.StartupTaints, key) >= 0 {
			return key
		}
	}
	return ""
}
