package doctor

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// A taint is stranded when its key is one kube-node-ready writes (any
// preset's, or one an agent or webhook of ours was configured with, now or
// in an earlier revision of the agent DaemonSet) and no running agent
// removes it: after `helm rollback` to a release that does not know the
// newer keys, or after a custom key changed without listing the old one in
// agent.previousTaintKeys. Nothing else ever takes it off the node.

// StrandedTaint is a taint key of ours on nodes that no running agent
// removes, and how to get it off them.
type StrandedTaint struct {
	// Key is the taint's key.
	Key string `json:"key"`
	// Role is startup (the node never verifies) or unhealthy (a recovered
	// node stays out of service).
	Role Role `json:"role"`
	// From says where the key is known from: a preset, an agent's flags,
	// an earlier revision of an agent DaemonSet.
	From string `json:"from"`
	// Nodes are the nodes carrying it, sorted.
	Nodes []string `json:"nodes"`
	// Detail says why nothing removes it.
	Detail string `json:"detail"`
	// Fixes are alternative changes, each enough on its own.
	Fixes []string `json:"fixes"`
}

// agentOwner is one running agent and the taint keys it removes from its
// node.
type agentOwner struct {
	in Install
	// startup and unhealthy are its taints, key=value:Effect.
	startup, unhealthy string
	// previous are the user's --previous-taint-keys.
	previous []string
	// owned are the keys it removes.
	owned []string
}

// readOwner reads what the agent container c removes; in is its
// installation. A value that does not resolve is warned about by
// readAgent already, so it is taken as the default here without a word.
func readOwner(c corev1.Container, in Install) agentOwner {
	o := agentOwner{in: in}
	keys, _ := AgentTaintKeys(c, in.Agent)
	o.startup, o.unhealthy = keys.Startup, keys.Unhealthy
	v, _, _ := Setting(c, api.AgentEnvPrefix, "", api.PreviousTaintKeysFlag)
	var previous flagenv.StringList
	_ = previous.Set(v) // Set never fails
	o.previous = previous
	o.owned = text.AppendNew(nil, taintKey(o.startup), taintKey(o.unhealthy))
	o.owned = text.AppendNew(o.owned, keys.PreviousStartup...)
	o.owned = text.AppendNew(o.owned, keys.PreviousUnhealthy...)
	return o
}

// taintKey is the key of a taint in key=value:Effect form.
func taintKey(t string) string {
	parsed, err := cli.ParseTaint(t)
	if err != nil {
		return t
	}
	return parsed.Key
}

// knownKey is a taint key of ours: its role, and where it is known from.
type knownKey struct {
	role Role
	from string
}

// knownKeys collects the keys kube-node-ready writes, in the order they are
// added; a key added as startup and as unhealthy is a startup key (the
// agent may re-taint with its startup taint).
type knownKeys struct {
	order []string
	keys  map[string]knownKey
}

func (k *knownKeys) add(key string, role Role, from string) {
	if key == "" {
		return
	}
	if k.keys == nil {
		k.keys = map[string]knownKey{}
	}
	was, ok := k.keys[key]
	switch {
	case !ok:
		k.order = append(k.order, key)
		k.keys[key] = knownKey{role: role, from: from}
	case role == RoleStartup && was.role != RoleStartup:
		k.keys[key] = knownKey{role: role, from: was.from}
	}
}

// addAgent adds the keys an agent (or a webhook watching it) uses.
func (k *knownKeys) addAgent(startup, unhealthy string, previous []string, from string) {
	k.add(taintKey(startup), RoleStartup, from)
	k.add(taintKey(unhealthy), RoleUnhealthy, from)
	for _, key := range previous {
		k.add(key, RoleStartup, from+" (--previous-taint-keys)")
	}
}

// presetKeys are every preset's keys.
func presetKeys() *knownKeys {
	k := &knownKeys{}
	for _, p := range api.Presets() {
		k.add(p.StartupTaintKey, RoleStartup, "the "+p.Name+" preset's startup key")
	}
	for _, p := range api.Presets() {
		k.add(p.UnhealthyTaintKey, RoleUnhealthy, "the "+p.Name+" preset's unhealthy key")
	}
	return k
}

// daemonSetRevision is the part of a DaemonSet's ControllerRevision the
// doctor reads: the pod template that revision rolled out.
type daemonSetRevision struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// revisionTemplate decodes the pod template a DaemonSet's revision holds;
// ok is false when it holds none.
func revisionTemplate(rev *appsv1.ControllerRevision) (corev1.PodTemplateSpec, bool) {
	var d daemonSetRevision
	if len(rev.Data.Raw) == 0 || json.Unmarshal(rev.Data.Raw, &d) != nil || len(d.Spec.Template.Spec.Containers) == 0 {
		return corev1.PodTemplateSpec{}, false
	}
	return d.Spec.Template, true
}

// revisionOf says whether rev is a revision of ds.
func revisionOf(rev *appsv1.ControllerRevision, ds *appsv1.DaemonSet) bool {
	if rev.Namespace != ds.Namespace {
		return false
	}
	for _, ref := range rev.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Name == ds.Name && (ds.UID == "" || ref.UID == ds.UID) {
			return true
		}
	}
	return false
}

// strandedTaints finds the taints of ours on nodes that none of owners
// removes. known are the keys of ours; nodes being deleted are left out.
func strandedTaints(nodes []corev1.Node, known *knownKeys, owners []agentOwner) []StrandedTaint {
	owned := map[string]bool{}
	for _, o := range owners {
		for _, key := range o.owned {
			owned[key] = true
		}
	}
	on := map[string][]string{}
	for i := range nodes {
		n := &nodes[i]
		if n.DeletionTimestamp != nil {
			continue
		}
		for _, t := range n.Spec.Taints {
			if _, ours := known.keys[t.Key]; ours && !owned[t.Key] && !slices.Contains(on[t.Key], n.Name) {
				on[t.Key] = append(on[t.Key], n.Name)
			}
		}
	}
	var keys []string
	for _, key := range known.order {
		if len(on[key]) > 0 {
			keys = append(keys, key)
		}
	}
	ownedList := make([]string, 0, len(owned))
	for key := range owned {
		ownedList = append(ownedList, key)
	}
	sort.Strings(ownedList)
	out := []StrandedTaint{}
	for _, key := range keys {
		k := known.keys[key]
		nodes := on[key]
		slices.Sort(nodes)
		s := StrandedTaint{Key: key, Role: k.role, From: k.from, Nodes: nodes}
		s.Detail = strandedDetail(s, owners, ownedList)
		s.Fixes = strandedFixes(s, owners, keys)
		out = append(out, s)
	}
	return out
}

// strandedDetail says why nothing removes s's key and what that does.
func strandedDetail(s StrandedTaint, owners []agentOwner, owned []string) string {
	d := s.Key + " is a taint key of kube-node-ready (" + s.From + "), but "
	if len(owners) == 0 {
		d += "no kube-node-ready agent runs to remove it."
	} else {
		d += "no running agent removes it: they remove " + strings.Join(owned, ", ") + "."
	}
	if s.Role == RoleStartup {
		return d + " A node carrying it never verifies: workloads that do not tolerate it never land there, and Cluster Autoscaler " +
			"counts it unready after --max-node-startup-time."
	}
	return d + " A node re-tainted with it stays out of service after it recovered: the taint stays for ever."
}

// strandedFixes are the ways to get s's key off its nodes: let a running
// agent that knows previous keys remove it (all keys stranded, at once, so
// one fix does not undo another), hand the nodes over to an older agent's
// own taint, which it removes when its checks pass, or, with no agent,
// remove the taint.
func strandedFixes(s StrandedTaint, owners []agentOwner, stranded []string) []string {
	if len(owners) == 0 {
		return []string{"no agent runs to verify these nodes: remove the taint: " + taintNodes(s.Nodes, s.Key+"-")}
	}
	var fixes []string
	for _, o := range owners {
		prefix := ""
		if len(owners) > 1 {
			prefix = "for " + o.in.Agent + ": "
		}
		if cli.PreviousTaintKey(s.Key) == nil {
			keys := slices.Clone(o.previous)
			for _, key := range stranded {
				if cli.PreviousTaintKey(key) == nil {
					keys = text.AppendNew(keys, key)
				}
			}
			if o.in.Release != "" {
				fixes = append(fixes, prefix+"let the running agent remove it (it verifies each node carrying it, then removes the key): "+
					HelmUpgrade(o.in, "agent.previousTaintKeys={"+strings.Join(keys, ",")+"}"))
			} else {
				fixes = append(fixes, prefix+"let the running agent remove it: give the agent ("+o.in.Agent+") and the webhook --previous-taint-keys="+strings.Join(keys, ","))
			}
			continue
		}
		own := o.startup
		if s.Role == RoleUnhealthy {
			own = o.unhealthy
		}
		fixes = append(fixes, fmt.Sprintf("%shand the nodes to the running agent's own %s taint, which it removes once its checks pass: %s",
			prefix, s.Role, taintNodes(s.Nodes, "--overwrite", own, s.Key+"-")))
	}
	return fixes
}

// taintNodes is a kubectl taint command with args for each of nodes: one
// command for one node, a shell loop for more.
func taintNodes(nodes []string, args ...string) string {
	a := strings.Join(args, " ")
	if len(nodes) == 1 {
		return "kubectl taint node " + nodes[0] + " " + a
	}
	return "for node in " + strings.Join(nodes, " ") + `; do kubectl taint node "$node" ` + a + "; done"
}
