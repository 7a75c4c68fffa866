package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// The names status gives the agent's taints.
const (
	taintUnverified = "unverified"
	taintUnhealthy  = "unhealthy"
)

// TaintKeys are the keys status and why take for the agent's taints: the
// ones it writes and the ones it removes (a node carrying one is still
// being verified, or recovering), so that a node tainted under any preset,
// an earlier configuration or the deployed one is named.
type TaintKeys struct {
	// Startup are the keys of startup taints ("unverified").
	Startup []string
	// Unhealthy are the keys of re-taints ("unhealthy"); a key that is
	// also a startup key counts as one (the agent can re-taint with its
	// startup taint).
	Unhealthy []string
}

// PresetTaintKeys are every preset's keys, the seed keys among them: what
// every agent recognizes whatever its configuration.
func PresetTaintKeys() TaintKeys {
	return TaintKeys{Startup: api.PreviousStartupTaintKeys(), Unhealthy: api.PreviousUnhealthyTaintKeys()}
}

// Add adds the keys of a configuration: its taints and previous keys.
func (k *TaintKeys) Add(c cli.TaintKeys) {
	for _, t := range []struct {
		keys     *[]string
		taint    string
		previous []string
	}{{&k.Startup, c.Startup, c.PreviousStartup}, {&k.Unhealthy, c.Unhealthy, c.PreviousUnhealthy}} {
		if parsed, err := cli.ParseTaint(t.taint); err == nil {
			*t.keys = text.AppendNew(*t.keys, parsed.Key)
		}
		*t.keys = text.AppendNew(*t.keys, t.previous...)
	}
}

// on are the agent's taints on node, by name, with their keys: unverified
// for a startup key, unhealthy for a re-taint key (any value or effect).
func (k TaintKeys) on(node *corev1.Node) (names, keys []string) {
	names, keys = []string{}, []string{}
	for _, role := range []struct {
		name string
		is   func(string) bool
	}{
		{taintUnverified, func(key string) bool { return slices.Contains(k.Startup, key) }},
		{taintUnhealthy, func(key string) bool { return slices.Contains(k.Unhealthy, key) && !slices.Contains(k.Startup, key) }},
	} {
		found := false
		for _, t := range node.Spec.Taints {
			if role.is(t.Key) && !slices.Contains(keys, t.Key) {
				keys, found = append(keys, t.Key), true
			}
		}
		if found {
			names = append(names, role.name)
		}
	}
	return names, keys
}

// none says which keys a node without any of the agent's taints lacks.
func (k TaintKeys) none() string {
	unhealthy := slices.DeleteFunc(slices.Clone(k.Unhealthy), func(key string) bool { return slices.Contains(k.Startup, key) })
	return "none of the startup keys " + strings.Join(k.Startup, ", ") + " nor the unhealthy keys " + strings.Join(unhealthy, ", ")
}

// readTaintKeys are the keys status and why recognize: every preset's and
// those of each agent DaemonSet deployed (its --startup-taint,
// --unhealthy-taint and --previous-taint-keys, as the agent resolves
// them), looked for where doctor looks. A failed read leaves the presets'
// keys and says so in warnings; no DaemonSet found is no warning (agents
// may run outside one).
func readTaintKeys(ctx context.Context, inv *invocation) (TaintKeys, []string) {
	keys := PresetTaintKeys()
	ns, fallback := "", inv.namespace
	if inv.explicit {
		ns, fallback = inv.namespace, ""
	}
	// Where all namespaces may not be listed, the context's namespace is
	// looked in without a word: only a read that fails in the end is.
	dss, _, _, err := doctor.ListFallback(ctx, ns, fallback, "kube-node-ready", inv.api.ListDaemonSets)
	if err != nil {
		return keys, []string{fmt.Sprintf("%v: only the presets' taint keys are recognized", err)}
	}
	var warnings []string
	for i := range dss {
		ds := &dss[i]
		if !doctor.IsOurs(ds.Spec.Template, doctor.AgentApp) || len(ds.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		who := "DaemonSet " + ds.Namespace + "/" + ds.Name
		c, w := doctor.AgentTaintKeys(doctor.AgentContainer(ds.Spec.Template), who)
		warnings = append(warnings, w...)
		keys.Add(c)
	}
	return keys, warnings
}

// printWarnings writes each warning to w, prefixed as kubectl does.
func printWarnings(w io.Writer, warnings []string) {
	for _, msg := range warnings {
		text.Printf(w, "warning: %s\n", msg)
	}
}
